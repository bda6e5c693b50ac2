package lock

import (
	"fmt"
	"strings"

	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
)

// ValidateName reports whether name can be used as a lock name: it must be
// non-empty and must not contain NUL. Any other byte is allowed; '/' and
// '%' are escaped in the key (see NamePrefix).
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if strings.ContainsRune(name, 0) {
		return fmt.Errorf("%w: %q contains NUL", ErrInvalidName, name)
	}
	return nil
}

// lockName is a lock name and its keys under the session's prefix.
type lockName struct {
	name string
	keys keyspace.Name
}

// NamePrefix returns the etcd key prefix under which the contenders for
// name keep their keys, given the lock prefix (DefaultPrefix, or the one
// given to WithPrefix): prefix, name with '%' written as %25 and '/' as %2F,
// and a '/'. Escaped, a name holds no '/', so no name's key range contains
// another's ("jobs" and "jobs/nightly" are two locks). A name without '/'
// and '%' is its own key segment, as etcd's concurrency.Mutex and etcdctl
// lock write it: with the same prefix, those clients and etcdlock exclude
// each other on such names.
//
// NamePrefix checks its arguments as the entry points do: a prefix that
// WithPrefix rejects fails with ErrInvalidOption, a name that ValidateName
// rejects with ErrInvalidName.
func NamePrefix(prefix, name string) (string, error) {
	if err := validatePrefix(prefix); err != nil {
		return "", err
	}
	if err := ValidateName(name); err != nil {
		return "", err
	}
	return keyspace.Of(prefix, name).Contenders(), nil
}
