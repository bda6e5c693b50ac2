package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
	"syscall"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

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
	return withCode(exitcode.Usage, fmt.Errorf(format, args...))
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
		return exitcode.Timeout
	case errors.As(err, &locked):
		return exitcode.NotAcquired
	case errors.Is(err, lock.ErrNotHeld), errors.Is(err, lock.ErrNotOwner), errors.Is(err, lock.ErrLost):
		return exitcode.Lost
	case errors.Is(err, lock.ErrInvalidName), errors.Is(err, lock.ErrInvalidOption), errors.Is(err, fencing.ErrInvalidToken):
		return exitcode.Usage
	case isPermission(err):
		return exitcode.Permission
	case isConfig(err):
		return exitcode.Config
	case isUnavailable(err):
		return exitcode.Unavailable
	}
	return exitcode.Error
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
	return errors.As(err, &pathErr) || errors.As(err, &unknownAuth) ||
		errors.As(err, &certInvalid) || errors.As(err, &hostname) || errors.As(err, &recordErr)
}

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

// exitStatus is the shell convention: the exit code, or 128+N for signal N.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return exitcode.Error
}
