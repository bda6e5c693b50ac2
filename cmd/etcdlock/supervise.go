//go:build !windows

package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/etcdlock/etcdlock/cmd/internal/guardian"
	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// killMargin is how long before etcd's earliest possible expiry the
// command must have received SIGKILL.
const killMargin = 50 * time.Millisecond

// deadlineEvery is how often the guardian is told the lease's current
// deadline. It only needs to be well below the renewal interval: a
// deadline that reaches the guardian late is an earlier one, never a later.
const deadlineEvery = 50 * time.Millisecond

// superviseCommand runs argv under a guardian (see package guardian) while
// l is held. It returns the command's exit code once every process of the
// command is gone; or an error wrapping the loss (lock.ErrLost) if the lock
// was lost, the command then stopped; or an error if the guardian could not
// be started or died.
func superviseCommand(g *globalOptions, l *lock.Lock, s *lock.Session, argv []string, o *runOptions, killSig syscall.Signal, sigc <-chan os.Signal) (int, error) {
	if o.shell {
		argv = []string{"/bin/sh", "-c", argv[0]}
	}
	fg := inForeground(g.stdin)
	soft, hard := guardDeadlines(s)
	env := map[string]string{
		"ETCDLOCK_NAME":     l.Name(),
		"ETCDLOCK_KEY":      l.Key(),
		fencing.EnvVar:      l.Token().String(),
		"ETCDLOCK_OWNER":    l.Owner(),
		"ETCDLOCK_DEADLINE": l.Deadline().UTC().Format(time.RFC3339Nano),
	}
	base := os.Environ()
	env["ETCDLOCK_NAMES"] = strings.Join(l.Names(), "\n")
	if l.Slot() >= 0 {
		env["ETCDLOCK_SLOT"] = strconv.Itoa(l.Slot())
	} else {
		// Not a semaphore's: a slot inherited from an outer run is not ours.
		base = slices.DeleteFunc(base, func(kv string) bool { return strings.HasPrefix(kv, "ETCDLOCK_SLOT=") })
	}
	gd, err := guardian.Start(guardian.Config{
		Argv:       argv,
		Env:        childEnv(base, env),
		Stdin:      g.stdin,
		Stdout:     g.stdout,
		Stderr:     g.stderr,
		KillSignal: killSig,
		KillGrace:  o.killGrace,
		Foreground: fg,
		JSONNotes:  g.printer.format == "json",
		Soft:       soft,
		Hard:       hard,
	})
	if err != nil {
		return 0, fmt.Errorf("cannot run %s: %w", argv[0], err)
	}
	contc := make(chan os.Signal, 1)
	if fg {
		signal.Notify(contc, syscall.SIGCONT)
		defer signal.Stop(contc)
	}
	tick := time.NewTicker(deadlineEvery)
	defer tick.Stop()

	var (
		lostErr error
		lost    = l.Lost()
		pgid    int
	)
	for {
		select {
		case ev, ok := <-gd.Events():
			switch {
			case !ok:
				// The guardian died without reporting (it was killed): the
				// command had SIGKILL as its parent-death signal; its group
				// gets it too.
				if pgid > 0 {
					_ = unix.Kill(-pgid, unix.SIGKILL)
				}
				return 0, fmt.Errorf("the guardian of the command died (%v); the command's process group was killed", gd.Err())
			case ev.Started != 0:
				pgid = ev.Started
				g.logger.Debug("command started", zap.Int("pid", pgid))
			case ev.Stopped:
				// Ctrl-Z stopped the command: stop this job as the
				// terminal would have. Renewals stop with it.
				_ = unix.Kill(0, unix.SIGTSTP)
			case ev.Exited:
				for range gd.Events() { // until the guardian is waited for
				}
				if lostErr == nil && !time.Now().Before(s.Deadline()) {
					// The guardian stopped the command at the deadline
					// while this process was stopped or starved: the
					// session sees the loss as soon as it runs.
					select {
					case <-l.Lost():
					case <-time.After(time.Second):
					}
					lostErr = cmp.Or(l.Err(), error(errDeadlinePassed))
				}
				if lostErr != nil {
					return 0, fmt.Errorf("lock %q lost while the command ran; the command was stopped: %w", l.Name(), lostErr)
				}
				return ev.Code, nil
			}
		case sig := <-sigc:
			g.logger.Info("forwarding signal", zap.Stringer("signal", sig))
			_ = gd.Signal(sig.(syscall.Signal))
		case <-contc:
			_ = gd.Continue(inForeground(g.stdin))
		case <-lost:
			lost = nil
			lostErr = l.Err()
			_ = gd.Stop(fmt.Sprintf("lock %q lost (%v)", l.Name(), lostErr), killGrace(o.killGrace, s, lostErr))
		case <-tick.C:
			if lost == nil {
				continue
			}
			if next, nextHard := guardDeadlines(s); next.After(soft) {
				soft = next
				_ = gd.SetDeadline(soft, nextHard)
			}
		}
	}
}

// errDeadlinePassed stands for the loss when the session has not reported
// it yet.
var errDeadlinePassed = fmt.Errorf("%w: the lease deadline passed while the command ran", lock.ErrLost)

// guardDeadlines are the guardian's: stop the command at the lease's
// conservative deadline; SIGKILL must have gone out killMargin before etcd
// could expire the lease (Deadline + SafetyMargin).
func guardDeadlines(s *lock.Session) (soft, hard time.Time) {
	soft = s.Deadline()
	return soft, soft.Add(max(s.SafetyMargin()-killMargin, 0))
}

// killGrace cuts the user's grace so that SIGKILL goes out before etcd
// could expire the lease. When the key is already gone, someone else may
// hold the lock: no grace.
func killGrace(want time.Duration, s *lock.Session, cause error) time.Duration {
	if errors.Is(cause, lock.ErrKeyDeleted) || errors.Is(cause, lock.ErrLeaseExpired) {
		return 0
	}
	_, hard := guardDeadlines(s)
	return max(min(want, time.Until(hard)), 0)
}

// inForeground reports whether in is a terminal whose foreground process
// group is etcdlock's: then the command gets the terminal while it runs.
func inForeground(in io.Reader) bool {
	f, ok := in.(*os.File)
	if !ok {
		return false
	}
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}
