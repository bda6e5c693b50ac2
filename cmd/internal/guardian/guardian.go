// Package guardian keeps a command from outliving the lock it runs under,
// even when the etcdlock process that holds the lock is killed or frozen.
//
// `etcdlock run` (the supervisor) does not start the command itself. It
// starts a guardian — its own binary, re-executed — and the guardian starts
// the command. The guardian:
//
//   - is a child subreaper (PR_SET_CHILD_SUBREAPER): every process the
//     command starts, including ones that call setsid or double-fork, stays
//     below the guardian, so it can find all of them in /proc and kill them;
//   - holds the read end of a pipe whose only write end the supervisor
//     holds, so it learns of the supervisor's death at once (EOF), however
//     it died; a parent-death signal with a parent check is the second line;
//   - is told each new lease deadline by the supervisor. When the last one
//     passes without a fresh one (the supervisor is frozen, or its renewals
//     stopped), it stops the command on its own;
//   - after the command exits, stops whatever it left running before it
//     reports the exit status, so the supervisor releases the lock only when
//     every process of the command is gone.
//
// Stopping is always: the kill signal to every process below the guardian
// (with SIGCONT, so that a stopped process sees it), SIGKILL once the grace
// period ends or the hard deadline comes, whichever is first; then every
// process is reaped. The hard deadline is the supervisor's bound on when
// etcd could expire the lease, less a margin: past it, someone else could
// hold the lock.
//
// Times cross the process boundary as CLOCK_MONOTONIC readings, which both
// processes share and Go's timers follow.
//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package guardian

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Command is the argument that makes etcdlock run as a guardian, and
// EnvMarker the environment variable the supervisor sets for it alone. A
// process started by hand with the argument but without the marker is
// refused.
const (
	Command   = "guardian"
	EnvMarker = "ETCDLOCK_GUARDIAN"
)

// The guardian's end of the two pipes, as file descriptors in its process.
const (
	controlFD = 3 // supervisor → guardian
	statusFD  = 4 // guardian → supervisor
)

// op names a message on either pipe.
type op string

const (
	opConfig   op = "config"   // → the command to run and how to stop it; first message
	opDeadline op = "deadline" // → a new deadline pair
	opSignal   op = "signal"   // → forward a signal to the command's process group
	opStop     op = "stop"     // → the lock is lost: stop the command now
	opContinue op = "continue" // → the supervisor was continued after a job-control stop
	opStarted  op = "started"  // ← the command runs with this pid
	opStopped  op = "stopped"  // ← the command was stopped from the terminal (Ctrl-Z)
	opStopping op = "stopping" // ← a stop was received and the kill signal sent
	opExit     op = "exit"     // ← every process is gone; the command's exit status (and its killing signal)
)

// message is one JSON line on a pipe.
type message struct {
	Op         op       `json:"op"`
	Argv       []string `json:"argv,omitempty"`
	KillSignal int      `json:"kill_signal,omitempty"`
	KillGrace  int64    `json:"kill_grace_ns,omitempty"`
	Foreground bool     `json:"foreground,omitempty"`
	JSONNotes  bool     `json:"json_notes,omitempty"`
	Soft       int64    `json:"soft_ns,omitempty"` // CLOCK_MONOTONIC
	Hard       int64    `json:"hard_ns,omitempty"` // CLOCK_MONOTONIC
	Signal     int      `json:"signal,omitempty"`
	Reason     string   `json:"reason,omitempty"`
	Grace      int64    `json:"grace_ns,omitempty"`
	Pid        int      `json:"pid,omitempty"`
	Code       int      `json:"code,omitempty"`
}

// Config describes the command a guardian runs.
type Config struct {
	// Argv is the command and its arguments; Argv[0] is looked up in PATH.
	Argv []string
	// Env is the command's whole environment.
	Env []string
	// Stdin, Stdout and Stderr are the command's (and the guardian's).
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// KillSignal starts every stop; SIGKILL follows after KillGrace, or at
	// the hard deadline if that is sooner.
	KillSignal syscall.Signal
	KillGrace  time.Duration
	// Foreground puts the command's process group in the foreground of the
	// terminal on Stdin (which must be the controlling terminal, with the
	// caller's group in the foreground) and gives the terminal back after.
	Foreground bool
	// JSONNotes makes the guardian write its notes on Stderr as JSON
	// objects {"note": "..."}, as etcdlock's -w json does.
	JSONNotes bool
	// Soft and Hard are the first deadlines: at Soft the guardian stops the
	// command unless told a later one; Hard is when SIGKILL must have gone
	// out. Hard is not before Soft.
	Soft, Hard time.Time
}

// Guardian is the supervisor's handle on a running guardian process.
// Its methods are safe for one goroutine at a time.
type Guardian struct {
	cmd    *exec.Cmd
	ctrl   *os.File
	enc    *json.Encoder
	events chan Event
	done   chan struct{}
	werr   error // the guardian process's wait error, set before done closes
}

// Event is something the guardian reports.
type Event struct {
	// Started is the command's pid (its process group id too), once.
	Started int
	// Stopped is set when the command was stopped from the terminal.
	Stopped bool
	// Stopping acknowledges a Stop: the kill signal went out, SIGKILL
	// follows by the deadline.
	Stopping bool
	// Exited is set with Code when every process of the command is gone;
	// Code is the command's exit status (exitcode.SignalBase+N for signal
	// N, exitcode.CannotExecute if it could not be started,
	// exitcode.NotFound if it was not found).
	Exited bool
	Code   int
	// Signal is the signal that killed the command, with Exited; 0 if it
	// exited by itself.
	Signal syscall.Signal
}

// ErrExited is returned by Guardian's methods once the guardian is gone.
var ErrExited = errors.New("guardian: the guardian process has exited")

// Start starts a guardian process, which starts the command. Events are
// delivered on Events until the guardian exits; the caller must read them.
func Start(cfg Config) (*Guardian, error) {
	if len(cfg.Argv) == 0 {
		return nil, errors.New("guardian: no command")
	}
	if cfg.Hard.Before(cfg.Soft) {
		return nil, fmt.Errorf("guardian: hard deadline %v is before soft deadline %v", cfg.Hard, cfg.Soft)
	}
	ctrlR, ctrlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		ctrlR.Close()
		ctrlW.Close()
		return nil, err
	}
	// The caller becomes a child subreaper where the system has them: if
	// the guardian dies, the processes below it move up to the caller,
	// where Kill finds them.
	if err := becomeSubreaper(); err != nil {
		ctrlR.Close()
		ctrlW.Close()
		statR.Close()
		statW.Close()
		return nil, fmt.Errorf("guardian: cannot become a child subreaper: %w", err)
	}
	c := &exec.Cmd{
		Path:       selfExe(),
		Args:       append([]string{"etcdlock", Command, "--"}, cfg.Argv...),
		Env:        append(cfg.Env[:len(cfg.Env):len(cfg.Env)], EnvMarker+"=1"),
		Stdin:      cfg.Stdin,
		Stdout:     cfg.Stdout,
		Stderr:     cfg.Stderr,
		ExtraFiles: []*os.File{ctrlR, statW}, // fds 3 and 4
		SysProcAttr: &syscall.SysProcAttr{
			// Its own group: signals meant for the job (the terminal's
			// Ctrl-C, kill of the job's group) reach the supervisor, which
			// decides what the command gets; a Ctrl-Z of the job does not
			// stop the guardian's deadline.
			Setpgid: true,
		},
	}
	setParentDeathSignal(c.SysProcAttr, parentDeathSignal)
	err = c.Start()
	ctrlR.Close()
	statW.Close()
	if err != nil {
		ctrlW.Close()
		statR.Close()
		return nil, fmt.Errorf("guardian: start: %w", err)
	}
	g := &Guardian{cmd: c, ctrl: ctrlW, enc: json.NewEncoder(ctrlW), events: make(chan Event, 4), done: make(chan struct{})}
	go g.readStatus(statR) // ends when the guardian exits (its write end closes)
	err = g.send(message{
		Op:         opConfig,
		Argv:       cfg.Argv,
		KillSignal: int(cfg.KillSignal),
		KillGrace:  int64(cfg.KillGrace),
		Foreground: cfg.Foreground,
		JSONNotes:  cfg.JSONNotes,
		Soft:       monoOf(cfg.Soft),
		Hard:       monoOf(cfg.Hard),
	})
	if err != nil {
		_ = c.Process.Kill()
		<-g.done
		return nil, err
	}
	return g, nil
}

// readStatus turns the guardian's messages into events, waits for the
// process and closes Events.
func (g *Guardian) readStatus(r *os.File) {
	defer close(g.done)
	defer close(g.events)
	dec := json.NewDecoder(r)
	for {
		var m message
		if err := dec.Decode(&m); err != nil {
			break
		}
		switch m.Op {
		case opStarted:
			g.events <- Event{Started: m.Pid}
		case opStopped:
			g.events <- Event{Stopped: true}
		case opStopping:
			g.events <- Event{Stopping: true}
		case opExit:
			g.events <- Event{Exited: true, Code: m.Code, Signal: syscall.Signal(m.Signal)}
		}
	}
	r.Close()
	g.werr = g.cmd.Wait()
	g.ctrl.Close()
}

// Events delivers the guardian's reports; it is closed when the guardian
// process has exited and been waited for. If it closes without an Exited
// event, the guardian died: the command may still run.
func (g *Guardian) Events() <-chan Event { return g.events }

// Err is the guardian process's exit error, valid after Events is closed.
func (g *Guardian) Err() error {
	<-g.done
	return g.werr
}

// SetDeadline tells the guardian new deadlines (see Config).
func (g *Guardian) SetDeadline(soft, hard time.Time) error {
	return g.send(message{Op: opDeadline, Soft: monoOf(soft), Hard: monoOf(hard)})
}

// Signal forwards sig to the command's process group.
func (g *Guardian) Signal(sig syscall.Signal) error {
	return g.send(message{Op: opSignal, Signal: int(sig)})
}

// Stop makes the guardian stop the command now (the lock is lost), with
// grace between the kill signal and SIGKILL (cut to the hard deadline; 0
// sends SIGKILL at once). reason is printed on the guardian's stderr. The
// guardian acknowledges with a Stopping event; one that does not within
// StopAck cannot be trusted to stop the command: call Kill.
func (g *Guardian) Stop(reason string, grace time.Duration) error {
	return g.send(message{Op: opStop, Reason: reason, Grace: max(int64(grace), 0)})
}

// Continue tells the guardian that the supervisor was continued after a
// job-control stop; foreground says whether its group has the terminal, in
// which case the command gets it back.
func (g *Guardian) Continue(foreground bool) error {
	return g.send(message{Op: opContinue, Foreground: foreground})
}

func (g *Guardian) send(m message) error {
	select {
	case <-g.done:
		return ErrExited
	default:
	}
	if err := g.enc.Encode(m); err != nil {
		return fmt.Errorf("guardian: %w (%w)", ErrExited, err)
	}
	return nil
}

// monoOf converts t into a CLOCK_MONOTONIC reading, which other processes
// on this host share.
func monoOf(t time.Time) int64 {
	return monoNow() + int64(time.Until(t))
}

func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("guardian: CLOCK_MONOTONIC: %v", err)) // cannot fail on Linux
	}
	return ts.Nano()
}
