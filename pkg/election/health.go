package election

import (
	"fmt"
	"net/http"
	"time"
)

// Check is a health check for the replica: it fails while this replica
// believes it leads (its OnStartedLeading is still running) although the
// term's deadline has passed — the leader is stuck, starved or ignoring its
// context. It succeeds when following. Use it as a liveness probe, like
// client-go's HealthzAdaptor.
func (e *Elector) Check(_ *http.Request) error {
	t := e.started()
	if t == nil {
		return nil
	}
	// On the session's clock, which may be a test's fake (see
	// lock.WithClock): the deadline is a time on that clock.
	if late := t.clock.Since(t.Deadline()); late > 0 {
		return fmt.Errorf("election %q: leading with token %s but past its lease deadline by %v", t.Name, t.Token, late.Round(time.Millisecond))
	}
	return nil
}

// ServeHTTP answers 200 "ok" when Check passes and 503 with the reason
// otherwise.
func (e *Elector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := e.Check(r); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}
