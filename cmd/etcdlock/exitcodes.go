package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Exit codes. Listed in the README and in `etcdlock help exit-codes`; any
// other code is the wrapped command's own (128+N when a signal N killed it).
const (
	exitOK          = 0
	exitError       = 1   // any other failure
	exitUsage       = 64  // bad command line: unknown flag, missing argument, bad value
	exitUnavailable = 69  // etcd could not be reached
	exitNotAcquired = 75  // the lock is held by someone else (--try, acquire)
	exitPermission  = 77  // etcd refused: authentication or RBAC
	exitConfig      = 78  // configuration error: unreadable TLS files, bad certificates
	exitLost        = 79  // the lock was lost (while the command ran, or before renew/release)
	exitTimeout     = 124 // --timeout passed while waiting for the lock
)

const exitCodesHelp = `Exit codes:

  0    success (for run/elect: the command exited 0)
  1    other failure
  64   usage error: unknown flag, missing or bad argument, bad TTL or token
  69   etcd unreachable (no endpoint answered within --command-timeout)
  75   not acquired: the lock is held by someone else (run --try, acquire)
  77   permission denied by etcd (authentication failed, or RBAC forbids the key)
  78   configuration error: TLS files missing or unreadable, bad certificate
  79   lock lost: while the command ran (the command was killed), or the
       token given to renew/release/break no longer holds the lock
  124  timed out waiting for the lock (run/elect --timeout)
  126  run/elect: the command could not be executed
  127  run/elect: the command was not found
  N    run/elect: the command's own exit code; 128+N if signal N killed it
`

// exitErr carries an exit code and an optional message (nil err means the
// code speaks for itself, e.g. the child's own exit status).
type exitErr struct {
	code int
	err  error
}

func (e *exitErr) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitErr) Unwrap() error { return e.err }

func withCode(code int, err error) error { return &exitErr{code: code, err: err} }

func usageErr(format string, args ...any) error {
	return withCode(exitUsage, fmt.Errorf(format, args...))
}

// errWaitTimeout is the cause of a context canceled by --timeout.
var errWaitTimeout = errors.New("timed out waiting for the lock")

// exitCode maps an error to its exit code.
func exitCode(err error) int {
	var e *exitErr
	if errors.As(err, &e) {
		return e.code
	}
	var locked *lock.LockedError
	switch {
	case errors.Is(err, errWaitTimeout):
		return exitTimeout
	case errors.As(err, &locked):
		return exitNotAcquired
	case errors.Is(err, lock.ErrNotHeld), errors.Is(err, lock.ErrNotOwner), errors.Is(err, lock.ErrLost):
		return exitLost
	case errors.Is(err, lock.ErrInvalidName), errors.Is(err, lock.ErrInvalidOption), errors.Is(err, fencing.ErrInvalidToken):
		return exitUsage
	case isPermission(err):
		return exitPermission
	case isConfig(err):
		return exitConfig
	case isUnavailable(err):
		return exitUnavailable
	}
	return exitError
}

func isPermission(err error) bool {
	for _, e := range []error{rpctypes.ErrPermissionDenied, rpctypes.ErrAuthFailed, rpctypes.ErrUserEmpty, rpctypes.ErrUserNotFound, rpctypes.ErrInvalidAuthToken, rpctypes.ErrAuthNotEnabled} {
		if errors.Is(err, e) {
			return true
		}
	}
	if s, ok := status.FromError(errors.Unwrap(err)); ok && (s.Code() == codes.PermissionDenied || s.Code() == codes.Unauthenticated) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "permission denied") || strings.Contains(msg, "authentication failed")
}

func isConfig(err error) bool {
	var pathErr *fs.PathError
	var unknownAuth x509.UnknownAuthorityError
	var certInvalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var recordErr tls.RecordHeaderError
	return errors.Is(err, errConfig) || errors.As(err, &pathErr) || errors.As(err, &unknownAuth) ||
		errors.As(err, &certInvalid) || errors.As(err, &hostname) || errors.As(err, &recordErr)
}

// errConfig marks configuration errors found before contacting etcd.
var errConfig = errors.New("configuration error")

func isUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rpctypes.ErrNoLeader) || errors.Is(err, rpctypes.ErrTimeout) {
		return true
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if s, ok := status.FromError(e); ok && (s.Code() == codes.Unavailable || s.Code() == codes.DeadlineExceeded) {
			return true
		}
	}
	return false
}
