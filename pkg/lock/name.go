package lock

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
)

// ValidateName reports whether name can be used as a lock name: it must be
// non-empty and must not contain NUL. Any other byte is allowed; '/' and
// '%' are escaped in the key (DESIGN.md, "Key layout and record").
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if strings.ContainsRune(name, 0) {
		return fmt.Errorf("%w: %q contains NUL", ErrInvalidName, name)
	}
	return nil
}

// lockName is a lock name and its contender key, from which its other
// keys under the session's prefix follow (keys).
type lockName struct {
	name string
	key  string // the session's contender key of name
}

// keys returns every key of the name, sharing the contender key's bytes:
// a held Lock keeps no second copy of its prefix.
func (n lockName) keys() keyspace.Name { return keyspace.OfContender(n.key) }

func newRecord(owner string, o keyspace.Origin, now time.Time, seq uint64, ac acquireConfig) string {
	r := keyspace.Record{Owner: owner, Host: o.Host, PID: o.PID, Acquired: now.UTC(), Seq: seq, Shared: ac.shared, LockDelay: ac.lockDelay}
	if len(ac.names) > 1 {
		r.Names = ac.names
	}
	if ac.limit > 1 {
		r.Limit = ac.limit
	}
	return r.Encode()
}
