package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// The errors are built the way the commands meet them: lock's sentinels
// wrapped by lock and by the command, etcd's errors as clientv3 returns
// them (rpctypes.Error of the server's gRPC status).
// lostUnreachable is a lock lost while etcd could not be reached.
func lostUnreachable() error {
	return &lock.LostError{Kind: lock.ErrLost, Cause: lock.ErrDeadlinePassed,
		Detail: rpctypes.Error(status.Error(codes.Unavailable, "connection refused"))}
}

func TestExitCode(t *testing.T) {
	locked := &lock.LockedError{Name: "a", Owner: "cron@h1", Token: 7, Key: "/locks/a/1"}
	lost := lostUnreachable()
	tests := []struct {
		name string
		err  error
		want int
	}{
		// lock's sentinels
		{"held by another", locked, exitcode.NotAcquired},
		{"held by another, wrapped", fmt.Errorf("try: %w", locked), exitcode.NotAcquired},
		{"another limit", fmt.Errorf("lock: acquire %q: %w", "a", lock.ErrLimitMismatch), exitcode.Mismatch},
		{"renew: not held", fmt.Errorf("cannot renew: %w", fmt.Errorf("%w: %q with token %s", lock.ErrNotHeld, "a", fencing.Token(1))), exitcode.Lost},
		{"release: not the owner", fmt.Errorf("cannot release: %w", fmt.Errorf("%w: token 3", lock.ErrNotOwner)), exitcode.Lost},
		{"lost while the command ran", fmt.Errorf("lock %q lost while the command ran: %w", "a", lost), exitcode.Lost},
		{"invalid name", fmt.Errorf("%w: %q", lock.ErrInvalidName, "a/b"), exitcode.Usage},
		{"invalid option", fmt.Errorf("%w: TTL 0s", lock.ErrInvalidOption), exitcode.Usage},
		{"invalid token", fmt.Errorf("%w: -1", fencing.ErrInvalidToken), exitcode.Usage},

		// waiting
		{"--timeout", fmt.Errorf("%w after %v waiting for lock %q", errWaitTimeout, time.Second, "a"), exitcode.Timeout},
		{"context deadline", fmt.Errorf("lock: inspect %q: %w", "a", context.DeadlineExceeded), exitcode.Unavailable},
		{"context canceled", fmt.Errorf("lock: inspect %q: %w", "a", context.Canceled), exitcode.Error},

		// marked by the CLI
		{"usage", usageErr("--ttl: %w", errors.New("bad")), exitcode.Usage},
		{"flag error", withCode(exitcode.Usage, errors.New("unknown flag: --bogus")), exitcode.Usage},
		{"child's exit status", &exitErr{code: 3}, 3},
		{"interrupted", withCode(128+int(syscall.SIGINT), errors.New("interrupted")), 130},
		{"TLS file unreadable is config, not permission",
			withCode(exitcode.Config, fmt.Errorf("TLS file: %w", &fs.PathError{Op: "stat", Path: "/ca.pem", Err: syscall.EACCES})), exitcode.Config},
		{"code marked outside a lock sentinel", withCode(exitcode.Config, fmt.Errorf("x: %w", lock.ErrLost)), exitcode.Config},

		// etcd refused
		{"permission denied", fmt.Errorf("lock: inspect %q: %w", "a", rpctypes.Error(rpctypes.ErrGRPCPermissionDenied)), exitcode.Permission},
		{"authentication failed", rpctypes.Error(rpctypes.ErrGRPCAuthFailed), exitcode.Permission},
		{"invalid auth token", fmt.Errorf("lock: grant lease: %w", rpctypes.Error(rpctypes.ErrGRPCInvalidAuthToken)), exitcode.Permission},
		{"auth not enabled", rpctypes.Error(rpctypes.ErrGRPCAuthNotEnabled), exitcode.Permission},
		{"gRPC PermissionDenied status", fmt.Errorf("lock: %w", status.Error(codes.PermissionDenied, "denied")), exitcode.Permission},
		{"gRPC Unauthenticated status", fmt.Errorf("lock: %w", status.Error(codes.Unauthenticated, "who")), exitcode.Permission},
		{"watch refused", fmt.Errorf("%w: %w", lock.ErrWatchRefused, rpctypes.Error(rpctypes.ErrGRPCPermissionDenied)), exitcode.Permission},

		// configuration
		{"TLS file missing", &fs.PathError{Op: "open", Path: "/ca.pem", Err: fs.ErrNotExist}, exitcode.Config},
		{"unknown CA", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, exitcode.Config},
		{"wrong host name", fmt.Errorf("tls: %w", x509.HostnameError{Certificate: &x509.Certificate{}, Host: "etcd"}), exitcode.Config},
		{"not TLS", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, exitcode.Config},

		// unavailable
		{"gRPC Unavailable", fmt.Errorf("lock: inspect: %w", rpctypes.Error(status.Error(codes.Unavailable, "connection refused"))), exitcode.Unavailable},
		{"gRPC DeadlineExceeded", fmt.Errorf("a: %w", fmt.Errorf("b: %w", status.Error(codes.DeadlineExceeded, "slow"))), exitcode.Unavailable},
		{"no leader", rpctypes.Error(rpctypes.ErrGRPCNoLeader), exitcode.Unavailable},
		{"request timed out", fmt.Errorf("lock: %w", rpctypes.Error(rpctypes.ErrGRPCTimeout)), exitcode.Unavailable},
		{"leader changed", fmt.Errorf("lock: inspect %q: %w", "a", rpctypes.Error(rpctypes.ErrGRPCLeaderChanged)), exitcode.Unavailable},
		{"server stopped", rpctypes.Error(rpctypes.ErrGRPCStopped), exitcode.Unavailable},
		{"timed out, leader failed", rpctypes.Error(rpctypes.ErrGRPCTimeoutDueToLeaderFail), exitcode.Unavailable},
		{"unhealthy cluster", rpctypes.Error(rpctypes.ErrGRPCUnhealthy), exitcode.Unavailable},
		{"etcd refused otherwise", rpctypes.Error(rpctypes.ErrGRPCRequestTooLarge), exitcode.Error},

		{"anything else", errors.New("boom"), exitcode.Error},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exitCode(tt.err); got != tt.want {
				t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	g := &globalOptions{endpoints: []string{"e1:2379", "e2:2379"}}
	since := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	denied := fmt.Errorf("lock: inspect %q: %w", "a", rpctypes.Error(rpctypes.ErrGRPCPermissionDenied))
	deadline := fmt.Errorf("lock: inspect %q: %w", "a", context.DeadlineExceeded)
	lost := lostUnreachable()
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"held by another", fmt.Errorf("try: %w", &lock.LockedError{Name: "a", Owner: "cron@h1", Token: 7, Since: since}),
			`lock "a" is held by cron@h1 (token 7, since ` + since.Local().Format(time.RFC3339) + `)`},
		{"holder's time unknown", &lock.LockedError{Name: "a", Owner: "x", Token: 2},
			`lock "a" is held by x (token 2, since unknown)`},
		{"permission", denied, `etcd refused access: lock: inspect "a": etcdserver: permission denied`},
		{"unavailable", deadline, `cannot reach etcd at e1:2379,e2:2379: lock: inspect "a": context deadline exceeded`},
		{"not held", fmt.Errorf("cannot renew: %w", fmt.Errorf("%w: x", lock.ErrNotHeld)), "cannot renew: lock: not held: x"},
		{"lost, though etcd was unreachable", lost, "lock: lost: lease deadline passed without renewal (last error: rpc error: code = Unavailable desc = connection refused)"},
		{"marked code keeps its text", withCode(exitcode.Config, errors.New("--cert and --key must be given together")), "--cert and --key must be given together"},
		{"usage", usageErr("--ttl: %v", "bad"), "--ttl: bad"},
		{"bare exit status says nothing", &exitErr{code: 3}, ""},
		{"other", errors.New("boom"), "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := g.explain(tt.err, exitCode(tt.err)); got != tt.want {
				t.Errorf("explain(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

// A missing or extra argument is a usage error (64), as the exit-code
// table promises, for every command that checks its arguments.
func TestArgumentCountIsAUsageError(t *testing.T) {
	for _, args := range [][]string{{"status"}, {"leader"}, {"renew"}, {"release"}, {"break"}, {"acquire"}, {"list", "a", "b"}, {"kube-leaders", "a", "b"}, {"version", "x"}} {
		var stdout, stderr strings.Builder
		if code := Main(args, strings.NewReader(""), &stdout, &stderr); code != exitcode.Usage {
			t.Errorf("etcdlock %s: exit %d (%s), want %d", strings.Join(args, " "), code, strings.TrimSpace(stderr.String()), exitcode.Usage)
		}
	}
}

// A read is tried again while etcd is briefly unavailable, and not when
// it fails otherwise; once ctx ends it returns the last failure.
func TestRetryRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	calls := 0
	err := retryRead(ctx, func(context.Context) error {
		if calls++; calls < 3 {
			return fmt.Errorf("lock: inspect: %w", rpctypes.Error(rpctypes.ErrGRPCLeaderChanged))
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("after two leader changes: %v, %d calls; want success at the third", err, calls)
	}
	calls = 0
	boom := errors.New("boom")
	if err := retryRead(ctx, func(context.Context) error { calls++; return boom }); err != boom || calls != 1 {
		t.Errorf("another failure: %v after %d calls; want it at once", err, calls)
	}
	short, cancel := context.WithTimeout(ctx, 3*readRetry)
	defer cancel()
	calls = 0
	err = retryRead(short, func(context.Context) error { calls++; return rpctypes.Error(rpctypes.ErrGRPCNoLeader) })
	if !errors.Is(err, rpctypes.ErrNoLeader) || calls < 2 {
		t.Errorf("no leader until ctx ends: %v after %d calls; want etcd's error after retries", err, calls)
	}
}
