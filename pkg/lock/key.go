package lock

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
)

// Record is the JSON value stored in every contender's key.
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
}

func newRecord(owner string, now time.Time, seq uint64) string {
	host, _ := os.Hostname()
	b, _ := json.Marshal(Record{Owner: owner, Host: host, PID: os.Getpid(), Acquired: now.UTC(), Seq: seq})
	return string(b)
}

func parseRecord(v []byte) Record {
	var r Record
	_ = json.Unmarshal(v, &r) // a foreign or corrupt value reads as an unknown owner
	return r
}

// ValidateName reports whether name can be used as a lock name: it must be
// non-empty and must not contain '/', so that one name's keys can never fall
// under another name's prefix.
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%w: %q contains '/' or NUL", ErrInvalidName, name)
	}
	return nil
}

// contenderKey is the deterministic key of lease's claim on name, so that a
// retry after a lost reply finds the key its first attempt wrote.
func contenderKey(prefix, name string, lease clientv3.LeaseID) string {
	return fmt.Sprintf("%s%x", NamePrefix(prefix, name), int64(lease))
}

func lockedError(name string, kv *mvccpb.KeyValue) *LockedError {
	r := parseRecord(kv.Value)
	return &LockedError{Name: name, Owner: r.Owner, Token: fencing.Token(kv.CreateRevision), Key: string(kv.Key), Since: r.Acquired}
}

func isLeaseNotFound(err error) bool { return errors.Is(err, rpctypes.ErrLeaseNotFound) }

// NamePrefix returns the etcd key prefix under which the contenders for
// name keep their keys, given the lock prefix (DefaultPrefix, or the one
// given to WithPrefix).
func NamePrefix(prefix, name string) string { return prefix + name + "/" }
