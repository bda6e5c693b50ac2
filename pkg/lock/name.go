package lock

import (
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

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

// NamePrefix returns the etcd key prefix under which the contenders for
// name keep their keys, given the lock prefix (DefaultPrefix, or the one
// given to WithPrefix).
func NamePrefix(prefix, name string) string { return prefix + name + "/" }

// contenderKey is the deterministic key of lease's claim on name, so that a
// retry after a lost reply finds the key its first attempt wrote.
func contenderKey(prefix, name string, lease clientv3.LeaseID) string {
	return fmt.Sprintf("%s%x", NamePrefix(prefix, name), int64(lease))
}
