package kubelock

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// New refuses a TTL that the elector's RetryPeriod cannot renew in time,
// and timings client-go's NewLeaderElector refuses; the error names the
// TTL and the RetryPeriod that work.
func TestNewRefusesTimingsThatCannotRenew(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	for _, tc := range []struct {
		name string
		tm   Timings
		opts []lock.SessionOption
		want []string // in the error; none: New succeeds
	}{
		{"2s TTL, default timings", DefaultTimings, []lock.SessionOption{lock.WithTTL(2 * time.Second)}, []string{"TTL of at least 5s", "RetryPeriod of at most 875ms"}},
		{"3s TTL, 1.5s retry", Timings{15 * time.Second, 10 * time.Second, 1500 * time.Millisecond}, []lock.SessionOption{lock.WithTTL(3 * time.Second)},
			[]string{"TTL of at least 4s", "RetryPeriod of at most 1.35s"}},
		{"margin eats the TTL", DefaultTimings, []lock.SessionOption{lock.WithTTL(5 * time.Second), lock.WithSafetyMargin(2 * time.Second)}, []string{"TTL of at least 6s"}},
		{"renew deadline below retry", Timings{15 * time.Second, 2 * time.Second, 2 * time.Second}, nil, []string{"RenewDeadline above 1.2"}},
		{"lease duration below renew deadline", Timings{10 * time.Second, 10 * time.Second, 2 * time.Second}, nil, []string{"LeaseDuration above RenewDeadline"}},
		{"zero", Timings{}, nil, []string{"positive"}},
		{"defaults", DefaultTimings, nil, nil},
		{"5s TTL, default timings", DefaultTimings, []lock.SessionOption{lock.WithTTL(5 * time.Second)}, nil},
		{"2s TTL, 875ms retry", Timings{15 * time.Second, 10 * time.Second, 875 * time.Millisecond}, []lock.SessionOption{lock.WithTTL(2 * time.Second)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := New(cli, "ctl", "a", tc.tm, tc.opts...)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("New = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("New = %v, %v; want ErrInvalidOption", l, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestCallTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		t    Timings
		want time.Duration
	}{
		{DefaultTimings, 5 * time.Second},
		{Timings{RenewDeadline: 800 * time.Millisecond}, time.Second},
	} {
		if got := tc.t.CallTimeout(); got != tc.want {
			t.Errorf("%v.CallTimeout() = %v, want %v", tc.t, got, tc.want)
		}
	}
}
