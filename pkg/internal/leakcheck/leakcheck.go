// Package leakcheck finds goroutines a test binary leaked, allowing the
// ones an embedded etcd leaves behind for a while after it stopped to end.
package leakcheck

import (
	"time"

	"go.uber.org/goleak"
)

// Patience is how long a test binary that ran embedded etcd members waits
// for goroutines to end: longer than etcd's peer read timeout (5 s), which
// bounds how long a stopped member's peer connections outlive it
// (goleak's own retries give up after about half a second).
const Patience = 10 * time.Second

// Find returns goleak.Find's error (with opts) for goroutines still
// running after patience, or nil as soon as none is left.
func Find(patience time.Duration, opts ...goleak.Option) error {
	deadline := time.Now().Add(patience)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
