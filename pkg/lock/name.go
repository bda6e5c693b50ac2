package lock

import (
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
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
	return contendersPrefix(prefix, name), nil
}

// contendersPrefix is NamePrefix for a prefix and a name already checked.
func contendersPrefix(prefix, name string) string { return prefix + escapeName(name) + "/" }

var (
	nameEscaper   = strings.NewReplacer("%", "%25", "/", "%2F")
	nameUnescaper = strings.NewReplacer("%25", "%", "%2F", "/")
)

func escapeName(name string) string { return nameEscaper.Replace(name) }

// nameOfSegment is the name whose escaped form is seg; ok is false if seg
// is not one (a key that etcdlock did not write).
func nameOfSegment(seg string) (name string, ok bool) {
	name = nameUnescaper.Replace(seg)
	return name, ValidateName(name) == nil && escapeName(name) == seg
}

// contenderKey is the deterministic key of lease's claim on name, so that a
// retry after a lost reply finds the key its first attempt wrote.
func contenderKey(prefix, name string, lease clientv3.LeaseID) string {
	return fmt.Sprintf("%s%x", contendersPrefix(prefix, name), int64(lease))
}
