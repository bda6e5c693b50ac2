package lock

import (
	"errors"
	"testing"
	"time"
)

// A lease reported gone before etcd could have expired it was revoked;
// from then on it may have expired.
func TestGoneCause(t *testing.T) {
	earliest := time.Unix(1_000, 0)
	for _, tt := range []struct {
		answered time.Time
		want     error
	}{
		{earliest.Add(-time.Hour), ErrLeaseRevoked},
		{earliest.Add(-time.Nanosecond), ErrLeaseRevoked},
		{earliest, ErrLeaseExpired},
		{earliest.Add(time.Second), ErrLeaseExpired},
	} {
		if got := goneCause(tt.answered, earliest); !errors.Is(got, tt.want) {
			t.Errorf("goneCause(earliest%+v) = %v, want %v", tt.answered.Sub(earliest), got, tt.want)
		}
	}
}
