package keyspace

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"time"
)

// Origin is the host and process that write records: read once per
// session (or detached.Locks), not per acquisition.
type Origin struct {
	Host string
	PID  int
}

// ThisProcess is this process's Origin.
func ThisProcess() Origin {
	host, _ := os.Hostname()
	return Origin{Host: host, PID: os.Getpid()}
}

// NewOwner returns a new owner identity "host:pid:random" of o, the
// default owner of a session, an election candidate and a detached grant.
func (o Origin) NewOwner() string {
	host := o.Host
	if host == "" {
		host = "unknown"
	}
	return fmt.Sprintf("%s:%d:%08x", host, o.PID, rand.Uint32())
}

// ForeignHolder describes a holder whose key has no Record: another etcd
// lock client wrote it.
const ForeignHolder = "a key without an etcdlock record (an etcd lock client such as etcdctl lock or concurrency.Mutex)"

// Record is the JSON value stored in every contender's key, and in a
// semaphore's slot key and a lock-delay's marker beside it. Package
// holders shows its fields in holders.Contender.
type Record struct {
	Owner    string    `json:"owner"`
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Acquired time.Time `json:"acquired"` // when the key was written, on the writer's clock
	// Seq numbers a session's acquisitions (0 for Detached). It makes the
	// value of every key a lease writes unique, so that the clean-up of an
	// acquisition whose reply was lost can delete exactly the key that
	// acquisition wrote (a compare on the value), never a later one.
	Seq uint64 `json:"seq,omitempty"`
	// Limit is the number of holders a semaphore admits at once (see
	// WithLimit); 0 for a mutex or a read-write lock.
	Limit int `json:"limit,omitempty"`
	// Shared is set for a reader of a read-write lock (see WithShared).
	Shared bool `json:"shared,omitempty"`
	// Names lists every name of an AcquireAll, in the order given; empty
	// for a lock of one name.
	Names []string `json:"names,omitempty"`
	// LockDelay is the holder's lock-delay (see WithLockDelay), 0 if none.
	// A contender with a lock-delay of its own that finds this holder
	// ended uncleanly waits at least this long, even if its own delay is
	// shorter.
	LockDelay time.Duration `json:"lockDelay,omitempty"`
	// BreakRequested is when Break asked the holder to release (on the
	// breaker's clock); zero unless it did.
	BreakRequested time.Time `json:"breakRequested,omitzero"`
}

// Encode is r as a key's value.
func (r Record) Encode() string {
	b, _ := json.Marshal(r) // cannot fail: no type in Record can
	return string(b)
}

// Decode decodes a key's value; ok is false if it is not an etcdlock
// record (a key written by another lock client, such as etcdctl lock or
// concurrency.Mutex, whose value is empty), and r is then the zero Record.
func Decode(v []byte) (r Record, ok bool) {
	if json.Unmarshal(v, &r) != nil || r.Owner == "" {
		return Record{}, false
	}
	return r, true
}

// Owner is the owner in a key's record, "" for a foreign key.
func Owner(v []byte) string {
	r, _ := Decode(v)
	return r.Owner
}
