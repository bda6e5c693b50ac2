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
func superviseCommand(sv *supervisor, sigc <-chan os.Signal) result {
	if err := sv.start(); err != nil {
		return result{err: err}
	}
	contc := make(chan os.Signal, 1)
	if sv.fg {
		signal.Notify(contc, syscall.SIGCONT)
		defer signal.Stop(contc)
	}
	tick := time.NewTicker(deadlineEvery)
	defer tick.Stop()
	if sv.o.runTimeout > 0 {
		t := time.NewTimer(sv.o.runTimeout)
		defer t.Stop()
		sv.runOut = t.C
	}
	for {
		select {
		case ev, ok := <-sv.gd.Events():
			if r, done := sv.event(ev, ok); done {
				return r
			}
		case sig := <-sigc:
			sv.signal(sig.(syscall.Signal))
		case <-contc:
			_ = sv.gd.Continue(inForeground(sv.g.stdin))
		case <-sv.lost:
			sv.onLost()
		case <-sv.runOut:
			sv.onRunTimeout()
		case <-sv.ack:
			sv.onUnacknowledged()
		case <-tick.C:
			sv.onTick()
		}
	}
}

// start gives the guardian, once it is ready, the command with the lock's
// environment and the first deadlines.
func (sv *supervisor) start() error {
	g, l := sv.g, sv.l
	argv := sv.argv
	if sv.o.shell {
		argv = []string{"/bin/sh", "-c", argv[0]}
	}
	sv.fg = inForeground(g.stdin)
	sv.lost = l.Context().Done()
	// The guardian started while the lock was acquired; the deadlines it
	// gets are read once it is ready (a broken one is replaced first).
	if err := sv.gd.Ready(); err != nil {
		return guardianErr(fmt.Errorf("cannot run %s: %w", argv[0], err))
	}
	if _, why := sv.gd.Containment(); why != "" {
		g.printer.Note("the command runs in etcdlock's process tree, without a PID namespace (%s): if etcdlock and its guardian are both killed, its processes outlive the lock (--containment process-tree: this note is not shown)", why)
	}
	soft, hard := guardDeadlines(sv.s)
	sv.soft = soft
	err := sv.gd.Run(guardian.Config{
		Argv:       argv,
		Env:        lockEnv(sv.s, l),
		KillSignal: sv.killSig,
		KillGrace:  sv.o.killGrace,
		Foreground: sv.fg,
		JSONNotes:  g.printer.format == "json",
		Quiet:      g.quiet,
		Soft:       soft,
		Hard:       hard,
	})
	if err != nil {
		return fmt.Errorf("cannot run %s: %w", argv[0], err)
	}
	return nil
}

// lockEnv is the command's environment: etcdlock's, with the lock's
// ETCDLOCK_* variables set over inherited ones.
func lockEnv(s *session, l *lock.Lock) []string {
	env := map[string]string{
		"ETCDLOCK_NAME":     l.Name(),
		"ETCDLOCK_KEY":      l.Key(),
		fencing.EnvVar:      l.Token().String(),
		"ETCDLOCK_OWNER":    s.owner,
		"ETCDLOCK_DEADLINE": s.Deadline().UTC().Format(time.RFC3339Nano),
		"ETCDLOCK_NAMES":    strings.Join(s.names, "\n"),
	}
	base := os.Environ()
	if l.Slot() >= 0 {
		env["ETCDLOCK_SLOT"] = strconv.Itoa(l.Slot())
	} else {
		// Not a semaphore's: a slot inherited from an outer run is not ours.
		base = slices.DeleteFunc(base, func(kv string) bool { return strings.HasPrefix(kv, "ETCDLOCK_SLOT=") })
	}
	return childEnv(base, env)
}

// event handles what the guardian reported (ok false: it is gone); done
// says the command's supervision is over, with r.
func (sv *supervisor) event(ev guardian.Event, ok bool) (r result, done bool) {
	switch {
	case !ok:
		return sv.guardianDied(), true
	case ev.Stopping:
		sv.ack = nil
	case ev.Started != 0:
		sv.g.logger.Debug("command started", zap.Int("pid", ev.Started))
	case ev.Stopped:
		// Ctrl-Z stopped the command: stop this job as the terminal
		// would have. Renewals stop with it.
		_ = unix.Kill(0, unix.SIGTSTP)
	case ev.Exited:
		return sv.exited(ev), true
	}
	return result{}, false
}

// guardianDied handles a guardian that died without reporting (it was
// killed): everything below it moved up to this process, a subreaper too,
// or died with its PID namespace; kill what is left before the lock is
// released.
func (sv *supervisor) guardianDied() result {
	if kerr := sv.gd.Kill(); kerr != nil {
		sv.g.printer.Note("%v", kerr)
	}
	err := fmt.Errorf("the guardian of the command died (%v); every process of the command was killed", sv.gd.Err())
	if sv.lostErr != nil {
		err = fmt.Errorf("%s lost while the command ran (%w); %v", someOf(sv.s.names), sv.lostErr, err)
	}
	return result{err: err}
}

// exited is the end of a command whose every process is gone.
func (sv *supervisor) exited(ev guardian.Event) result {
	for range sv.gd.Events() { // until the guardian is waited for
	}
	l := sv.l
	if sv.lostErr == nil && !time.Now().Before(sv.soft) {
		// The guardian stopped the command at the deadline it was told
		// while this process was stopped or starved: the session sees the
		// loss as soon as it runs. The guardian's deadline, not the
		// session's: a renewal whose reply came late may have moved the
		// session's since, and the command was stopped all the same.
		select {
		case <-l.Context().Done():
		case <-time.After(time.Second):
		}
		sv.lostErr = cmp.Or(l.Err(), error(errDeadlinePassed))
	}
	switch {
	case sv.lostErr != nil:
		return result{err: fmt.Errorf("%s lost while the command ran; the command was stopped: %w", someOf(sv.s.names), sv.lostErr)}
	case sv.timedOut:
		return result{err: fmt.Errorf("the command ran past --run-timeout %v and was stopped: %w", sv.o.runTimeout, errRunTimeout)}
	case ev.StartError != "":
		return result{err: withCode(ev.Code, errors.New(ev.StartError))}
	}
	if sv.fg && !sv.forwarded && (ev.Signal == syscall.SIGINT || ev.Signal == syscall.SIGQUIT) {
		sv.g.terminalSignal = true // the terminal's: etcdlock received none
	}
	return result{code: ev.Code, sig: ev.Signal}
}

// signal forwards a signal etcdlock received to the command.
func (sv *supervisor) signal(sig syscall.Signal) {
	sv.forwarded = true
	sv.g.logger.Info("forwarding signal", zap.String("signal", signals.Name(sig)))
	_ = sv.gd.Signal(sig)
}

// onLost stops the command of a lock that was lost.
func (sv *supervisor) onLost() {
	sv.lost = nil
	sv.lostErr = sv.l.Err()
	sv.stop(fmt.Sprintf("%s lost (%v)", someOf(sv.s.names), sv.lostErr), killGrace(sv.o.killGrace, sv.s, sv.lostErr))
}

// onRunTimeout stops a command that ran past --run-timeout, unless a loss
// is stopping it already.
func (sv *supervisor) onRunTimeout() {
	sv.runOut = nil
	if sv.lost != nil {
		sv.timedOut = true
		sv.stop(fmt.Sprintf("--run-timeout %v passed", sv.o.runTimeout), killGrace(sv.o.killGrace, sv.s, nil))
	}
}

// stop asks the guardian to stop the command, and expects its
// acknowledgement within guardian.StopAck.
func (sv *supervisor) stop(why string, grace time.Duration) {
	_ = sv.gd.Stop(why, grace)
	sv.ack, sv.asked = time.After(guardian.StopAck), time.Now()
}

// onUnacknowledged handles a stop the guardian did not acknowledge in
// time: it is frozen or hung, and cannot be trusted to stop the command.
func (sv *supervisor) onUnacknowledged() {
	if time.Since(sv.asked) > 2*guardian.StopAck {
		// This process was stopped or starved since it asked: the
		// acknowledgement may be waiting. Ask for one more.
		sv.ack, sv.asked = time.After(guardian.StopAck), time.Now()
		return
	}
	sv.ack = nil
	sv.g.printer.Note("the guardian did not acknowledge the stop within %v (it is frozen or hung): killing it and every process of the command", guardian.StopAck)
	if err := sv.gd.Kill(); err != nil {
		sv.g.printer.Note("%v", err)
	}
}

// onTick tells the guardian the lease's newer deadline, while the lock
// is held, and notes failing renewals.
func (sv *supervisor) onTick() {
	if sv.lost == nil {
		return
	}
	if !time.Now().Before(sv.soft) {
		// The guardian stops the command at the deadline it was told, on
		// its own: that verdict is final. A later deadline, from a
		// renewal whose reply came late, must not make the command's
		// exit look like its own (143 for the SIGTERM instead of 79).
		sv.lost = nil
		sv.lostErr = cmp.Or(sv.l.Err(), error(errDeadlinePassed))
		return
	}
	sv.renewals.check(sv.g.printer, sv.s)
	if next, nextHard := guardDeadlines(sv.s); next.After(sv.soft) {
		sv.soft = next
		_ = sv.gd.SetDeadline(next, nextHard)
	}
}

// errDeadlinePassed stands for the loss when the session has not reported
// it yet.
var errDeadlinePassed = fmt.Errorf("%w: the lease deadline passed while the command ran", lock.ErrLost)

// guardDeadlines are the guardian's: stop the command at the lease's
// conservative deadline; SIGKILL must have gone out killMargin before etcd
// could expire the lease (Deadline + margin).
func guardDeadlines(s *session) (soft, hard time.Time) {
	soft = s.Deadline()
	return soft, soft.Add(max(s.margin()-killMargin, 0))
}

// killGrace cuts the user's grace so that SIGKILL goes out before etcd
// could expire the lease. When the key is already gone, someone else may
// hold the lock: no grace.
func killGrace(want time.Duration, s *session, cause error) time.Duration {
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
