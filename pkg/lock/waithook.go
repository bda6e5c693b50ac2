package lock

// WaitHookOption is what WithWaitHook returns: an AcquireOption.
type WaitHookOption struct{ fn func() }

// WithWaitHook calls fn once, on the acquiring goroutine, when the
// acquisition finds that it must wait: for an older contender of the name
// (its holder or a waiter ahead; for AcquireAll, of any of the names), for
// a semaphore slot, or for a lock-delay to pass. It is called after etcd
// answered the write that queued the acquisition, before the wait; never
// for an acquisition that holds at once or that is refused at once
// (ErrLimitMismatch, or TryAcquire's LockedError). The acquisition may
// still fail after it (a reader that then finds a semaphore queued ahead,
// its ctx ending). A tool uses it to say whom it waits for only when it
// does wait. fn must not be nil and must return quickly. An AcquireOption.
func WithWaitHook(fn func()) WaitHookOption { return WaitHookOption{fn} }

func (o WaitHookOption) set(c *config) error {
	if o.fn == nil {
		return invalid("nil wait hook")
	}
	c.acquire.waitHook = o.fn
	return nil
}

func (WaitHookOption) acquireOption() {}
