package backoff

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDoublesToMax(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: 500 * time.Millisecond}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	want := []time.Duration{100, 200, 400, 500, 500}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("waits %v, want %v ms", got, want)
		}
	}
	b.Reset()
	if w := b.Next(); w != b.Min {
		t.Errorf("after Reset the wait is %v, want Min %v", w, b.Min)
	}
}

func TestJitter(t *testing.T) {
	b := Backoff{Min: 50 * time.Millisecond, Max: 200 * time.Millisecond, Jitter: true}
	for _, w := range []time.Duration{50, 100, 200, 200} {
		w *= time.Millisecond
		if got := b.Next(); got < w/2 || got > w {
			t.Errorf("wait %v outside [%v, %v]", got, w/2, w)
		}
	}
	var zero Backoff
	if got := zero.Next(); got != 0 {
		t.Errorf("the zero Backoff waits %v", got)
	}
	zero.Jitter = true
	if got := zero.Next(); got != 0 {
		t.Errorf("the zero Backoff with jitter waits %v", got)
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("Sleep = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on an ended ctx = %v, want context.Canceled", err)
	}
}
