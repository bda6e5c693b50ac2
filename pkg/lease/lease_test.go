package lease_test

import (
	"math"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/lease"
)

func TestMargin(t *testing.T) {
	for _, tc := range []struct{ given, ttl, want time.Duration }{
		{0, 10 * time.Second, time.Second},
		{0, time.Second, lease.MinMargin},
		{0, 2 * time.Second, lease.MinMargin},
		{0, 3 * time.Second, 300 * time.Millisecond},
		{3 * time.Second, 10 * time.Second, 3 * time.Second},
	} {
		if got := lease.Margin(tc.given, tc.ttl); got != tc.want {
			t.Errorf("Margin(%v, %v) = %v, want %v", tc.given, tc.ttl, got, tc.want)
		}
	}
}

func TestDeadline(t *testing.T) {
	sent := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got, want := lease.Deadline(sent, 10*time.Second, time.Second), sent.Add(9*time.Second); !got.Equal(want) {
		t.Errorf("Deadline = %v, want %v", got, want)
	}
}

func TestSeconds(t *testing.T) {
	for ttl, want := range map[time.Duration]int64{
		time.Second: 1, 1500 * time.Millisecond: 2, 2 * time.Second: 2, time.Nanosecond: 1,
		math.MaxInt64: int64(math.MaxInt64/time.Second) + 1,
	} {
		if got := lease.Seconds(ttl); got != want {
			t.Errorf("Seconds(%v) = %d, want %d", ttl, got, want)
		}
	}
}
