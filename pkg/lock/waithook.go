package lock

// WithWaitHook calls fn, which must not be nil and must return quickly,
// once on the acquiring goroutine when the acquisition must wait (for a
// holder, a slot or a lock-delay). An AcquireOption.
func WithWaitHook(fn func()) forAcquire {
	return func(c *config) error {
		if fn == nil {
			return invalid("nil wait hook")
		}
		c.acquire.waitHook = fn
		return nil
	}
}
