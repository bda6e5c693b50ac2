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
	"github.com/etcdlock/etcdlock/cmd/internal/signals"
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

// superviseCommand runs argv under gd, a guardian Spawn started (see
// package guardian), while l is held. It returns the command's exit code
// (and the signal that killed it, if one did) once every process of the
// command is gone; or an error wrapping the loss (lock.ErrLost) if the
// lock was lost, the command then stopped; or an error if the guardian
// could not run the command or died.
func superviseCommand(g *globalOptions, gd *guardian.Guardian, l *lock.Lock, s *lock.Session, argv []string, o *runOptions, killSig syscall.Signal, sigc <-chan os.Signal) (int, syscall.Signal, error) {
	if o.shell {
		argv = []string{"/bin/sh", "-c", argv[0]}
	}
	fg := inForeground(g.stdin)
	// The guardian started while the lock was acquired; the deadlines it
	// gets are read once it is ready (a broken one is replaced first).
	if err := gd.Ready(); err != nil {
		return 0, 0, guardianErr(fmt.Errorf("cannot run %s: %w", argv[0], err))
	}
	if _, why := gd.Containment(); why != "" {
		g.printer.Note("the command runs in etcdlock's process tree, without a PID namespace (%s): if etcdlock and its guardian are both killed, its processes outlive the lock (--containment process-tree: this note is not shown)", why)
	}
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
	err := gd.Run(guardian.Config{
		Argv:       argv,
		Env:        childEnv(base, env),
		KillSignal: killSig,
		KillGrace:  o.killGrace,
		Foreground: fg,
		JSONNotes:  g.printer.format == "json",
		Quiet:      g.quiet,
		Soft:       soft,
		Hard:       hard,
	})
	if err != nil {
		return 0, 0, fmt.Errorf("cannot run %s: %w", argv[0], err)
	}
	contc := make(chan os.Signal, 1)
	if fg {
		signal.Notify(contc, syscall.SIGCONT)
		defer signal.Stop(contc)
	}
	tick := time.NewTicker(deadlineEvery)
	defer tick.Stop()
	var runOut <-chan time.Time // --run-timeout
	if o.runTimeout > 0 {
		t := time.NewTimer(o.runTimeout)
		defer t.Stop()
		runOut = t.C
	}
	timedOut := false
	var renewals renewWarning

	var (
		forwarded bool // a signal etcdlock received was forwarded to the command
		lostErr   error
		lost      = l.Lost()
		pgid      int
		ack       <-chan time.Time // set while a stop waits for the guardian's acknowledgement
		asked     time.Time        // when the stop was sent
	)
	for {
		select {
		case ev, ok := <-gd.Events():
			switch {
			case !ok:
				// The guardian died without reporting (it was killed):
				// everything below it moved up to this process, a
				// subreaper too; kill it all before the lock is released.
				kerr := gd.Kill()
				if kerr != nil {
					g.printer.Note("%v", kerr)
				}
				err := fmt.Errorf("the guardian of the command died (%v); every process of the command was killed", gd.Err())
				if lostErr != nil {
					err = fmt.Errorf("%s lost while the command ran (%w); %v", someOf(l.Names()), lostErr, err)
				}
				return 0, 0, err
			case ev.Stopping:
				ack = nil
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
					return 0, 0, fmt.Errorf("%s lost while the command ran; the command was stopped: %w", someOf(l.Names()), lostErr)
				}
				if timedOut {
					return 0, 0, fmt.Errorf("the command ran past --run-timeout %v and was stopped: %w", o.runTimeout, errRunTimeout)
				}
				if ev.StartError != "" {
					return 0, 0, withCode(ev.Code, errors.New(ev.StartError))
				}
				if fg && !forwarded && (ev.Signal == syscall.SIGINT || ev.Signal == syscall.SIGQUIT) {
					g.terminalSignal = true // the terminal's: etcdlock received none
				}
				return ev.Code, ev.Signal, nil
			}
		case sig := <-sigc:
			forwarded = true
			g.logger.Info("forwarding signal", zap.String("signal", signals.Name(sig.(syscall.Signal))))
			_ = gd.Signal(sig.(syscall.Signal))
		case <-contc:
			_ = gd.Continue(inForeground(g.stdin))
		case <-lost:
			lost = nil
			lostErr = l.Err()
			_ = gd.Stop(fmt.Sprintf("%s lost (%v)", someOf(l.Names()), lostErr), killGrace(o.killGrace, s, lostErr))
			ack, asked = time.After(guardian.StopAck), time.Now()
		case <-runOut:
			runOut = nil
			if lost != nil { // not already stopping for a loss
				timedOut = true
				_ = gd.Stop(fmt.Sprintf("--run-timeout %v passed", o.runTimeout), killGrace(o.killGrace, s, nil))
				ack, asked = time.After(guardian.StopAck), time.Now()
			}
		case <-ack:
			if time.Since(asked) > 2*guardian.StopAck {
				// This process was stopped or starved since it asked:
				// the acknowledgement may be waiting. Ask for one more.
				ack, asked = time.After(guardian.StopAck), time.Now()
				continue
			}
			ack = nil
			g.printer.Note("the guardian did not acknowledge the stop within %v (it is frozen or hung): killing it and every process of the command", guardian.StopAck)
			if err := gd.Kill(); err != nil {
				g.printer.Note("%v", err)
			}
		case <-tick.C:
			if lost == nil {
				continue
			}
			renewals.check(g.printer, s)
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
	if errors.Is(cause, lock.ErrKeyDeleted) || errors.Is(cause, lock.ErrLeaseRevoked) || errors.Is(cause, lock.ErrLeaseExpired) {
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
