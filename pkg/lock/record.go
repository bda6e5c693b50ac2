package lock

import (
	"os"
	"time"

	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
)

// origin is the host and process that write a record: read once per
// session (or Detached), not per acquisition.
type origin struct {
	host string
	pid  int
}

func thisProcess() origin {
	host, _ := os.Hostname()
	return origin{host: host, pid: os.Getpid()}
}

func newRecord(owner string, o origin, now time.Time, seq uint64, ac acquireConfig) string {
	r := keyspace.Record{Owner: owner, Host: o.host, PID: o.pid, Acquired: now.UTC(), Seq: seq, Shared: ac.shared, LockDelay: ac.lockDelay}
	if len(ac.names) > 1 {
		r.Names = ac.names
	}
	if ac.limit > 1 {
		r.Limit = ac.limit
	}
	return r.Encode()
}
