package main

import (
	"github.com/spf13/cobra"

	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// How an error ends the process: exitCode gives its code and explain its
// message. Commands return the errors they meet as they are (wrapped with
// %w for context); they mark with withCode only what no error can say: a
// usage or configuration mistake found by the CLI itself, the command's own
// exit status, exitcode.SignalBase+N after signal N.

// exitErr carries an exit code and an optional message (nil err means the
// code speaks for itself, e.g. the child's own exit status).
type exitErr struct {
	code int
	err  error
	// signal, if one of signals.Reraised, is what etcdlock dies of once
	// everything is cleaned up (code is then the fallback), so that its
	// parent sees what the command's or etcdlock's own death was.
	signal syscall.Signal
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

// usageArgs makes a cobra argument check's error a usage error (exit 64),
// as the exit-code table promises for a missing or extra argument.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return withCode(exitcode.Usage, err)
		}
		return nil
	}
}

// errRunTimeout is wrapped by the error of a command stopped at
// --run-timeout: exit 124, as timeout(1), which -E does not replace.
var errRunTimeout = errors.New("run timed out")

// errWaitTimeout is the cause of a context canceled by --timeout, and is
// wrapped by the error that the wait then returns.
var errWaitTimeout = errors.New("timed out")

// diedOf is the signal etcdlock should die of for err, 0 for none.
func diedOf(err error) syscall.Signal {
	var e *exitErr
	if errors.As(err, &e) {
		return e.signal
	}
	return 0
}

// exitCode maps an error to its exit code. It is the one place that
// classifies errors.
func exitCode(err error) int {
	if err == nil {
		return exitcode.OK
	}
	var e *exitErr
	if errors.As(err, &e) {
		return e.code
	}
	var locked *lock.LockedError
	switch {
	case errors.Is(err, errWaitTimeout), errors.Is(err, errRunTimeout):
		return exitcode.Timeout
	case errors.Is(err, lock.ErrLimitMismatch):
		return exitcode.Mismatch
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

// explain is the message printed for err, whose exit code is code: the
// error's own text, with what the user needs to act on the classes of
// etcd errors. It is "" when a bare code speaks for itself.
func (g *globalOptions) explain(err error, code int) string {
	var bare *exitErr
	if errors.As(err, &bare) && bare.err == nil {
		return ""
	}
	switch code {
	case exitcode.NotAcquired:
		var held *heldError
		if errors.As(err, &held) {
			return held.explain()
		}
		var locked *lock.LockedError
		if errors.As(err, &locked) && locked.Foreign {
			return fmt.Sprintf("lock %q is held by %s (token %s, lease %x)", locked.Name, holders.ForeignHolder, locked.Token, int64(locked.LeaseID))
		}
		if errors.As(err, &locked) {
			return fmt.Sprintf("lock %q is held by %s (token %s, since %s)", locked.Name, printable(locked.Owner), locked.Token, since(locked.Since))
		}
	case exitcode.Permission:
		return "etcd refused access: " + err.Error()
	case exitcode.Unavailable:
		var u *unreachableError
		if errors.As(err, &u) {
			return "cannot reach etcd: " + err.Error()
		}
		return fmt.Sprintf("cannot reach etcd at %s: %v", strings.Join(g.endpoints, ","), err)
	case exitcode.Config:
		var u *unreachableError
		if errors.As(err, &u) {
			return "etcd's TLS does not match the configuration: " + err.Error()
		}
	}
	return err.Error()
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

// isUnavailable says whether err is etcd unavailable: not reached in
// time, or a server's own "unavailable" (no leader, leader changed, a
// request timed out, server stopped), which etcd's client returns as an
// rpctypes.EtcdError.
func isUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) && ee.Code() == codes.Unavailable {
		return true
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if s, ok := status.FromError(e); ok && (s.Code() == codes.Unavailable || s.Code() == codes.DeadlineExceeded) {
			return true
		}
	}
	return false
}
