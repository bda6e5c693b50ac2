package main

import "testing"

// TestDemo runs the story `make demo` tells. run checks each step it
// prints: worker-a loses its lock before etcd deletes its key, worker-b's
// token is larger, worker-a's late write is refused as stale and its late
// release returns its loss, and worker-b still holds the lock after it.
func TestDemo(t *testing.T) {
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
