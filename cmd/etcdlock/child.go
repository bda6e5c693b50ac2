package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// killMargin is how long before etcd's earliest possible expiry the
// command must have received SIGKILL.
const killMargin = 50 * time.Millisecond

// superviseCommand runs argv in its own process group while l is held. It
// returns the command's exit code, or the loss error if the lock was lost
// (the whole group has then been killed).
func superviseCommand(ctx context.Context, g *globalOptions, l *lock.Lock, s *lock.Session, argv []string, o *runOptions, killSig syscall.Signal, sigc <-chan os.Signal) (int, error) {
	if o.shell {
		argv = []string{"/bin/sh", "-c", argv[0]}
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = g.stdin, g.stdout, g.stderr
	c.Env = childEnv(os.Environ(), map[string]string{
		"ETCDLOCK_NAME":     l.Name(),
		"ETCDLOCK_KEY":      l.Key(),
		fencing.EnvVar:      l.Token().String(),
		"ETCDLOCK_OWNER":    l.Owner(),
		"ETCDLOCK_DEADLINE": l.Deadline().UTC().Format(time.RFC3339Nano),
	})
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		g.printer.Note("cannot start %s: %v", argv[0], err)
		return code, nil
	}
	pgid := c.Process.Pid
	waitc := make(chan error, 1)
	go func() { waitc <- c.Wait() }() // ends when the command exits; read below before returning

	var (
		lostErr error
		lost    = l.Lost()
		killC   <-chan time.Time
	)
	for {
		select {
		case err := <-waitc:
			if lostErr != nil {
				// Members of the group that outlived the leader die too.
				_ = unix.Kill(-pgid, unix.SIGKILL)
				return 0, lostErr
			}
			return exitStatus(err), nil
		case sig := <-sigc:
			g.logger.Info("forwarding signal", zap.Stringer("signal", sig))
			_ = unix.Kill(-pgid, sig.(syscall.Signal))
		case <-lost:
			lost = nil
			lostErr = l.Err()
			grace := killGrace(o.killGrace, s, lostErr)
			g.printer.Note("lock %q lost (%v): sending %v to the command's process group, SIGKILL in %v", l.Name(), lostErr, killSig, grace.Round(time.Millisecond))
			_ = unix.Kill(-pgid, killSig)
			t := time.NewTimer(grace)
			defer t.Stop()
			killC = t.C
		case <-killC:
			killC = nil
			g.printer.Note("command still running after the grace period: sending SIGKILL")
			_ = unix.Kill(-pgid, unix.SIGKILL)
		}
	}
}

// killGrace cuts the user's grace so that SIGKILL goes out before etcd
// could expire the lease: the earliest expiry is Deadline + SafetyMargin.
// When the key is already gone, someone else may hold the lock: no grace.
func killGrace(want time.Duration, s *lock.Session, cause error) time.Duration {
	if errors.Is(cause, lock.ErrKeyDeleted) || errors.Is(cause, lock.ErrLeaseExpired) {
		return 0
	}
	limit := time.Until(s.Deadline().Add(s.SafetyMargin())) - killMargin
	return max(min(want, limit), 0)
}
