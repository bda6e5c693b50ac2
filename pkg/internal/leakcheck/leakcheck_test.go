package leakcheck

import (
	"testing"
	"time"
)

// A goroutine that ends within the patience is no leak; one that
// outlives it is.
func TestFindWaitsOutGoroutinesThatEnd(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { <-stop; close(done) }()
	time.AfterFunc(300*time.Millisecond, func() { close(stop) })
	if err := Find(5 * time.Second); err != nil {
		t.Errorf("a goroutine that ended after 300 ms: %v", err)
	}
	<-done

	stop2, done2 := make(chan struct{}), make(chan struct{})
	go func() { <-stop2; close(done2) }()
	if err := Find(300 * time.Millisecond); err == nil {
		t.Error("a goroutine still running: no leak found")
	}
	close(stop2)
	<-done2
}
