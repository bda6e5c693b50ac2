package lease_test

import (
	"fmt"
	"time"

	"github.com/etcdlock/etcdlock/pkg/lease"
)

// A holder that sent its last renewal at sent, of a lease etcd granted for
// 10 s, stops trusting it 1 s (the default margin) before etcd could
// expire it.
func ExampleDeadline() {
	sent := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ttl := time.Duration(lease.Seconds(9500*time.Millisecond)) * time.Second // etcd grants whole seconds
	margin := lease.Margin(0, ttl)
	fmt.Println(ttl, margin, lease.Deadline(sent, ttl, margin).Format(time.TimeOnly))
	// Output: 10s 1s 12:00:09
}
