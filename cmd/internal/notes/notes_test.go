package notes

import (
	"bytes"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A queue writes what it is given, in order, and Close waits for it.
func TestQueueWritesInOrder(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	q := New(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return out.Write(p)
	}), 8, nil)
	for _, s := range []string{"a\n", "b\n", "c\n"} {
		if n, err := q.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if !q.Close(time.Minute) {
		t.Fatal("Close did not see the writes written")
	}
	if got := out.String(); got != "a\nb\nc\n" {
		t.Errorf("wrote %q", got)
	}
	if n, err := q.Write([]byte("late")); n != 4 || err != nil {
		t.Errorf("Write after Close = %d, %v; want it dropped quietly", n, err)
	}
}

// Writes to a writer that never returns do not wait: the queue fills and
// drops the rest, and Close gives up after its bound.
func TestQueueNeverWaits(t *testing.T) {
	stuck, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	q := New(writerFunc(func(p []byte) (int, error) {
		once.Do(func() { close(stuck) })
		<-release
		return len(p), nil
	}), 2, nil)
	for range 100 {
		_, _ = q.Write([]byte("x"))
	}
	<-stuck
	if q.Close(10 * time.Millisecond) {
		t.Error("Close reported the writes written while the writer is stuck")
	}
	close(release) // lets the writer goroutine end, for goleak
	for !q.Close(time.Millisecond) {
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

var _ io.Writer = (*Queue)(nil)

// The writing goroutine, and the thread prepare may lock it to, start
// with the first write: a queue that is never written to costs neither.
func TestQueueStartsWithTheFirstWrite(t *testing.T) {
	prepared := make(chan struct{})
	n := runtime.NumGoroutine()
	q := New(io.Discard, 1, func() { close(prepared) })
	if got := runtime.NumGoroutine(); got != n {
		t.Errorf("%d goroutines after New, want %d", got, n)
	}
	if !q.Close(time.Minute) {
		t.Error("Close of a queue never written to did not return at once")
	}
	select {
	case <-prepared:
		t.Error("prepare ran for a queue never written to")
	default:
	}

	q = New(io.Discard, 1, func() { close(prepared) })
	_, _ = q.Write([]byte("x"))
	<-prepared
	if !q.Close(time.Minute) {
		t.Error("Close did not see the write written")
	}
}
