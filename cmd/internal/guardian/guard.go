//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package guardian

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
	"github.com/etcdlock/etcdlock/cmd/internal/notes"
	"github.com/etcdlock/etcdlock/cmd/internal/signals"
)

// parentDeathSignal is what the kernel sends the guardian when the thread
// that started it exits. Go may end that thread while the supervisor runs,
// so the guardian treats it as a hint and checks its parent.
const parentDeathSignal = syscall.SIGUSR2

// reapEvery bounds how long the SIGKILL phase waits between scans of
// /proc for processes that were forked while it was killing.
const reapEvery = 2 * time.Millisecond

// Main is the guardian process: it runs the command described by the
// supervisor's first message and returns the guardian's exit status. It
// never returns before every process below it is gone.
func Main(stderr io.Writer) int {
	switch os.Getenv(EnvMarker) {
	case Protocol:
	case "":
		fmt.Fprintln(stderr, "etcdlock: guardian is started by etcdlock run, not by hand")
		return exitcode.Usage // started by hand, without the supervisor's pipes
	default:
		// A supervisor of another release: it starts its own binary
		// instead when this one exits without saying it is ready.
		return exitcode.Usage
	}
	ignoreTerminalStops()
	for _, fd := range []int{controlFD, statusFD} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			terminalCall(func() { fmt.Fprintf(stderr, "etcdlock: guardian: pipe %d from etcdlock run is missing: %v\n", fd, err) })
			return exitcode.Usage
		}
		// Inherited without close-on-exec: the command must not hold
		// them (it could read the supervisor's messages, and would keep
		// the status pipe open after the guardian died).
		unix.CloseOnExec(fd)
	}
	// A write to a stderr or status pipe whose reader is gone must fail
	// with EPIPE, not kill the guardian: it still has processes to stop.
	// Caught, not ignored: the command gets SIGPIPE's default action.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	// Non-blocking, the control pipe is read through the runtime's poller:
	// a blocking read would hold a thread, and the runtime would start
	// another to run the loop.
	_ = unix.SetNonblock(controlFD, true)
	ctrl := os.NewFile(controlFD, "control")
	status := os.NewFile(statusFD, "status")
	g := &guard{
		notes:      newNotes(stderr),
		status:     status,
		supervisor: os.Getppid(),
		self:       os.Getpid(),
	}
	// Only the first process of a PID namespace has pid 1: the supervisor
	// started the guardian in a new one.
	g.ns = g.self == 1
	if g.ns {
		if err := enterNamespace(); err != nil {
			_ = writeMessage(g.status, message{Op: opReady, Reason: err.Error()})
			g.notes.Close(noteFlush)
			return exitcode.CannotExecute
		}
	}
	defer g.notes.Close(noteFlush)
	if err := writeMessage(g.status, message{Op: opReady}); err != nil {
		return exitcode.Internal // the supervisor is gone
	}
	return g.run(ctrl)
}

// guard is the guardian's state; only run's goroutine touches it.
type guard struct {
	notes      *notes.Queue // stderr, written without blocking the loop
	status     io.Writer    // the status pipe (writeMessage)
	supervisor int          // pid of the supervisor, the guardian's parent; 0 in a namespace, where it has none
	self       int
	// ns: the guardian is the first process of a PID namespace that
	// holds every process of the command; when it exits, however it
	// exits, the kernel kills them all.
	ns bool

	killSignal syscall.Signal
	killGrace  time.Duration
	foreground bool
	jsonNotes  bool
	quiet      bool          // progress notes are dropped
	jobPgrp    int           // the supervisor's process group, which had the terminal; 0 in a namespace
	termios    *unix.Termios // the terminal's settings before the command ran

	cmdPid   int
	cmdDone  bool
	cmdCode  int
	cmdSig   syscall.Signal // the signal that killed the command
	soft     int64          // CLOCK_MONOTONIC
	hard     int64
	stopping bool  // the kill signal went out
	killAt   int64 // when SIGKILL goes out, once stopping
	killing  bool  // SIGKILL went out

	// cmdStopped: the command was stopped (Ctrl-Z; SIGTTIN or SIGTTOU of
	// a background job) and has not been seen to continue since.
	cmdStopped bool

	// killEvery is the SIGKILL phase's period: reapEvery, doubled up to
	// deniedEvery while processes refuse SIGKILL (they changed user id).
	killEvery time.Duration
	denied    bool // the refusal was reported
}

// run runs the command of the supervisor's first message and watches it
// until it and every process below it are gone; it returns the guardian's
// exit status.
func (g *guard) run(ctrl *os.File) int {
	msgs := make(chan message)
	go readControl(ctrl, msgs) // ends when the supervisor's end closes

	cfg, ok := <-msgs
	if !ok {
		return 0 // the supervisor ended without a command: it never held the lock
	}
	if cfg.Op != opConfig || len(cfg.Argv) == 0 {
		g.note("guardian: no command from the supervisor")
		return exitcode.Internal
	}
	g.configure(cfg)

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, parentDeathSignal)
	// Left ignored when ignored (nohup), for the guardian and the command.
	signals.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// Never stopped: the guardian exits once run returns, and each signal
	// stopped would cost a round trip to the runtime's signal-mask thread.

	if code, started := g.start(cfg); !started {
		return code
	}
	return g.loop(msgs, sigs)
}

// configure takes the command's settings from cfg, the supervisor's
// first message.
func (g *guard) configure(cfg message) {
	g.killSignal = syscall.Signal(cfg.KillSignal)
	g.killGrace = time.Duration(cfg.KillGrace)
	g.foreground = cfg.Foreground
	g.jsonNotes = cfg.JSONNotes
	g.quiet = cfg.Quiet
	g.soft, g.hard = cfg.Soft, cfg.Hard
}

// start makes the guardian a subreaper and starts the command of cfg,
// and tells the supervisor it started. If it cannot, it tells the
// supervisor and returns the guardian's exit status, started false.
func (g *guard) start(cfg message) (code int, started bool) {
	if Limits != "" {
		g.progress("%s", Limits)
	}
	if err := becomeSubreaper(); err != nil {
		g.note("guardian: cannot become a child subreaper: %v", err)
		return g.exit(exitcode.CannotExecute), false
	}
	if os.Getppid() != g.supervisor {
		return g.exit(exitcode.CannotExecute), false // the supervisor died before we were ready
	}
	if g.foreground && !g.ns {
		g.jobPgrp, _ = unix.Getpgid(g.supervisor)
	}
	if g.foreground {
		g.termios, _ = unix.IoctlGetTermios(0, termiosGet)
	}
	if code, why := g.startCommand(fromBytes(cfg.Argv), fromBytes(cfg.Env)); why != "" {
		_ = writeMessage(g.status, message{Op: opExit, Code: code, Reason: why})
		return code, false
	}
	_ = writeMessage(g.status, message{Op: opStarted, Pid: g.cmdPid})
	return 0, true
}

// loop reaps, enforces the deadlines and handles the supervisor's
// messages and the guardian's signals, one method per event, until the
// command has exited and nothing is left below the guardian; it returns
// the command's exit status.
func (g *guard) loop(msgs <-chan message, sigs <-chan os.Signal) int {
	timer := time.NewTimer(0)
	defer timer.Stop()
	wake := newWakeTimer()
	for {
		if g.reap() {
			return g.exit(g.cmdCode)
		}
		g.enforce()
		next := g.nextWake()
		resetTimer(timer, next)
		wake.at(monoNow() + int64(next))
		select {
		case m, ok := <-msgs:
			if !ok {
				msgs = nil
				g.stopAll("etcdlock exited")
				continue
			}
			g.handle(m)
		case sig := <-sigs:
			g.signal(sig)
		case <-timer.C:
		}
	}
}

// signal handles a signal the guardian received: it stops the command,
// unless the signal is SIGCHLD (the loop reaps) or a hint of the
// supervisor's death that its parent contradicts.
func (g *guard) signal(sig os.Signal) {
	switch sig {
	case syscall.SIGCHLD:
		// reaped at the top of the loop
	case parentDeathSignal:
		if os.Getppid() != g.supervisor {
			g.stopAll("etcdlock exited")
		}
	default:
		g.stopAll(fmt.Sprintf("the guardian received %s", signals.Name(sig.(syscall.Signal))))
	}
}

// readControl decodes the supervisor's messages into msgs and closes it
// at EOF or on a malformed message.
func readControl(r io.ReadCloser, msgs chan<- message) {
	defer close(msgs)
	defer r.Close()
	mr := newMessageReader(r)
	for {
		m, err := mr.read()
		if err != nil {
			return
		}
		msgs <- m
	}
}

func (g *guard) handle(m message) {
	switch m.Op {
	case opDeadline:
		if m.Hard >= m.Soft {
			g.soft, g.hard = m.Soft, m.Hard
		}
	case opSignal:
		if !g.cmdDone {
			_ = unix.Kill(-g.cmdPid, syscall.Signal(m.Signal))
			if g.cmdStopped {
				// A stopped group keeps the signal pending: a job run
				// in the background whose command read the terminal
				// (SIGTTIN) would wait for ever. Continued, it gets it,
				// as a shell's kill %job continues a stopped job.
				_ = unix.Kill(-g.cmdPid, syscall.SIGCONT)
			}
		}
	case opStop:
		g.stopAllWithin(m.Reason, time.Duration(m.Grace))
		_ = writeMessage(g.status, message{Op: opStopping})
	case opContinue:
		if g.foreground && m.Foreground {
			g.setForeground(g.cmdPid)
		}
		_ = unix.Kill(-g.cmdPid, syscall.SIGCONT)
	}
}

// startCommand starts the command in its own process group, with env as
// its whole environment (none is empty: Run sends the supervisor's when
// the caller gave none). If it cannot be started, it returns the shell's
// exit status and why ("" once started). (Start, in the supervisor,
// starts the guardian process itself.)
func (g *guard) startCommand(argv, env []string) (code int, why string) {
	sys := &syscall.SysProcAttr{
		Setpgid:    true,
		Foreground: g.foreground,
		Ctty:       0, // stdin, in the command
	}
	setParentDeathSignal(sys, syscall.SIGKILL) // the guardian is gone: nothing else would stop it
	var pid int
	var err error
	startCall(func() { pid, err = forkExec(argv, env, sys) })
	if err != nil {
		why := fmt.Sprintf("cannot start %s: %v", argv[0], err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitcode.NotFound, why
		}
		return exitcode.CannotExecute, why
	}
	g.cmdPid = pid
	return 0, ""
}

// forkExec starts argv with env (nil is empty) and the guardian's stdin,
// stdout and stderr, as os/exec would: a name without a slash is looked
// up in PATH, the environment keeps the last entry of each name, and the
// errors read alike. It does not go through os.StartProcess, whose first
// call probes the kernel's pidfd support (about 0.5 ms of CPU on every
// run): the guardian reaps with wait4(-1) and needs no process handle.
func forkExec(argv, env []string, sys *syscall.SysProcAttr) (int, error) {
	path := argv[0]
	if path == "" {
		return 0, errors.New("exec: no command")
	}
	if filepath.Base(path) == path {
		lp, err := exec.LookPath(path)
		if err != nil {
			return 0, err
		}
		path = lp
	}
	env, err := dedupEnv(env)
	if err != nil {
		return 0, err
	}
	// Fd puts the files in blocking mode for the command, as os/exec does.
	files := []uintptr{os.Stdin.Fd(), os.Stdout.Fd(), os.Stderr.Fd()}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: env, Files: files, Sys: sys})
	if err != nil {
		return 0, &os.PathError{Op: "fork/exec", Path: path, Err: err}
	}
	return pid, nil
}

// dedupEnv keeps the last entry of each name in env, in order, and
// refuses an entry with a NUL byte, as os/exec does on Unix.
func dedupEnv(env []string) ([]string, error) {
	out := make([]string, 0, len(env))
	saw := make(map[string]bool, len(env))
	for i := len(env) - 1; i >= 0; i-- {
		kv := env[i]
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, errors.New("exec: environment variable contains NUL")
		}
		j := strings.Index(kv, "=")
		if j == 0 { // a name that starts with "="
			j = strings.Index(kv[1:], "=") + 1
		}
		if j < 0 {
			if kv != "" {
				out = append(out, kv) // not name=value: passed as it is
			}
			continue
		}
		k := kv[:j]
		if saw[k] {
			continue
		}
		saw[k] = true
		out = append(out, kv)
	}
	slices.Reverse(out)
	return out, nil
}

// reap collects every child that changed state and reports whether the
// guardian is done: the command exited and nothing is left below it.
func (g *guard) reap() bool {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WUNTRACED|unix.WCONTINUED, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ECHILD:
			if !g.cmdDone {
				return false // cannot happen: the command is our child
			}
			return true
		case err != nil || pid == 0:
			return false
		}
		if pid != g.cmdPid {
			continue // a descendant reparented to us, now gone
		}
		switch {
		case ws.Stopped():
			g.cmdStopped = true
			if g.foreground {
				g.commandStopped()
			}
		case ws.Continued():
			g.cmdStopped = false
		case ws.Exited():
			g.commandExited(ws.ExitStatus())
		case ws.Signaled():
			g.restoreTerminal()
			g.cmdSig = ws.Signal()
			g.commandExited(exitcode.SignalBase + int(ws.Signal()))
		}
	}
}

// commandExited records the command's status and stops what it left.
func (g *guard) commandExited(code int) {
	g.cmdDone, g.cmdCode = true, code
	if g.foreground {
		g.handBack()
	}
	if g.stopping {
		return
	}
	if n := len(g.below()); n > 0 {
		g.stopAll(fmt.Sprintf("the command exited and left %d %s running", n, plural(n, "process", "processes")))
	}
}

// commandStopped hands the terminal back and stops the supervisor's job,
// as the terminal's Ctrl-Z would have without etcdlock. The supervisor's
// renewals stop with it; the deadline still holds.
func (g *guard) commandStopped() {
	g.handBack()
	_ = writeMessage(g.status, message{Op: opStopped})
}

// stopAll sends the kill signal to everything below the guardian and sets
// the SIGKILL time: the grace period, cut to the hard deadline.
func (g *guard) stopAll(reason string) { g.stopAllWithin(reason, g.killGrace) }

// stopAllWithin is stopAll with its own grace period. A stop already under
// way keeps the earlier SIGKILL time.
func (g *guard) stopAllWithin(reason string, grace time.Duration) {
	now := monoNow()
	if g.stopping {
		g.killAt = min(g.killAt, now+int64(grace))
		return
	}
	g.stopping = true
	g.killAt = min(now+int64(grace), g.hard)
	wait := max(time.Duration(g.killAt-now), 0).Round(time.Millisecond)
	if !g.cmdDone {
		_ = unix.Kill(-g.cmdPid, g.killSignal)
	}
	denied := g.signalBelow(g.killSignal)
	if !g.cmdDone {
		_ = unix.Kill(-g.cmdPid, syscall.SIGCONT)
	}
	g.signalBelow(syscall.SIGCONT)
	cut := ""
	if wait < g.killGrace.Round(time.Millisecond) {
		cut = fmt.Sprintf(" (--kill-grace %v cut short: SIGKILL must go out before etcd could give the lock to someone else)", g.killGrace)
	}
	g.progress("%s: sent %s to the command and everything it started, SIGKILL in %v%s", reason, signals.Name(g.killSignal), wait, cut)
	g.refused(denied)
}

// enforce acts on deadlines that have passed.
func (g *guard) enforce() {
	now := monoNow()
	if !g.stopping && now >= g.soft {
		late := time.Duration(now - g.soft).Round(time.Millisecond)
		g.stopAll(fmt.Sprintf("no lease renewal from etcdlock by the deadline (%v ago)", late))
	}
	first := false
	if g.stopping && (now >= g.killAt || now >= g.hard) && !g.killing {
		g.killing, first = true, true
	}
	if g.killing {
		if !g.cmdDone {
			_ = unix.Kill(-g.cmdPid, syscall.SIGKILL)
		}
		g.refused(g.signalBelow(syscall.SIGKILL))
	}
	if first && !g.cmdDone {
		g.progress("the command was still running after the grace period: sent SIGKILL")
	}
}

// deniedEvery bounds the SIGKILL phase's period while processes refuse
// SIGKILL: trying every reapEvery would cost a CPU for as long as they run.
const deniedEvery = time.Second

// refused handles the processes that refused SIGKILL: they changed their
// user id (a setuid program such as sudo) and neither the guardian nor
// etcdlock may signal them. Nothing can end them but themselves or their
// owner: the guardian says so, once, and retries less and less often,
// waiting for them to exit — the lock stays held (or, if it was lost,
// they run beside its next holder).
func (g *guard) refused(denied []int) {
	if len(denied) == 0 {
		g.killEvery = reapEvery
		return
	}
	g.killEvery = min(max(g.killEvery*2, reapEvery), deniedEvery)
	if g.denied {
		return
	}
	g.denied = true
	g.progress("%d %s started by the command cannot be signalled (pid %v): %s changed user id, as setuid programs such as sudo do; waiting for %s to exit",
		len(denied), plural(len(denied), "process", "processes"), denied, plural(len(denied), "it", "they"), plural(len(denied), "it", "them"))
}

// nextWake is how long the loop may sleep before enforce has work.
func (g *guard) nextWake() time.Duration {
	if g.killing {
		return max(g.killEvery, reapEvery)
	}
	next := g.soft
	if g.stopping {
		next = min(g.killAt, g.hard)
	}
	return max(time.Duration(next-monoNow()), 0)
}

// progress is note for what etcdlock's -q silences: how the guardian
// stops the command, not why the command could not run.
func (g *guard) progress(format string, args ...any) {
	if !g.quiet {
		g.note(format, args...)
	}
}

// note queues a message for stderr, formatted as etcdlock's printer does.
// It never blocks: see notes.
func (g *guard) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if g.jsonNotes {
		b, _ := json.Marshal(map[string]string{"note": msg})
		_, _ = g.notes.Write(append(b, '\n'))
		return
	}
	_, _ = g.notes.Write([]byte("etcdlock: " + msg + "\n"))
}

// exit reports code to the supervisor and returns it.
func (g *guard) exit(code int) int {
	_ = writeMessage(g.status, message{Op: opExit, Code: code, Signal: int(g.cmdSig)})
	return code
}

// handBack gives the terminal back to the job's group, if the command's
// group has it. After a Ctrl-Z the shell takes the terminal when it sees
// the job stop, and may give it to another job; it is not the guardian's
// to take back then.
func (g *guard) handBack() {
	if pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err == nil && pgrp == g.cmdPid {
		if g.ns {
			// The job's group is outside the namespace, where the
			// guardian cannot name it: the supervisor takes the terminal.
			_ = writeMessage(g.status, message{Op: opHandBack})
			return
		}
		g.setForeground(g.jobPgrp)
	}
}

// restoreTerminal puts back the terminal's settings from before the
// command, as a shell does for a job killed by a signal: the command had
// no chance to undo its own (stty -echo, raw mode). Only while the
// command's group has the terminal: otherwise the shell has taken it and
// set it as it wants.
func (g *guard) restoreTerminal() {
	if g.termios == nil {
		return
	}
	if pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err == nil && pgrp == g.cmdPid {
		terminalCall(func() { _ = unix.IoctlSetTermios(0, termiosSetDrain, g.termios) })
	}
}

func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	t.Reset(d)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
