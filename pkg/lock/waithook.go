package lock

// WithWaitHook calls fn once, on the acquiring goroutine, when the
// acquisition finds it must wait (for an older contender, a slot or a
// lock-delay); never when it holds or is refused at once. The acquisition
// may still fail after it. fn must not be nil and must return quickly. An
// AcquireOption.
func WithWaitHook(fn func()) forAcquire {
	return func(c *config) error {
		if fn == nil {
			return invalid("nil wait hook")
		}
		c.acquire.waitHook = fn
		return nil
	}
}
