// Package guardian keeps a command from outliving the lock it runs under,
// even when the etcdlock process that holds the lock is killed or frozen.
//
// `etcdlock run` (the supervisor) does not start the command itself. It
// starts a guardian as soon as it starts (Spawn), so that the guardian's
// start-up overlaps connecting and acquiring: the small etcdlock-guardian
// binary when it is installed beside etcdlock, else etcdlock itself,
// re-executed. Once the lock is held it gives the guardian the command
// (Run), and the guardian starts it; if the lock never is, the guardian is
// ended (Close). The guardian:
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
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
	opReady    op = "ready"    // ← the guardian runs and speaks Protocol; first message
	opDeadline op = "deadline" // → a new deadline pair
	opSignal   op = "signal"   // → forward a signal to the command's process group
	opStop     op = "stop"     // → the lock is lost: stop the command now
	opContinue op = "continue" // → the supervisor was continued after a job-control stop
	opStarted  op = "started"  // ← the command runs with this pid
	opStopped  op = "stopped"  // ← the command was stopped from the terminal (Ctrl-Z)
	opStopping op = "stopping" // ← a stop was received and the kill signal sent
	opExit     op = "exit"     // ← every process is gone; the command's exit status (and its killing signal)
	opHandBack op = "handback" // ← give the terminal back to the supervisor's group (the guardian cannot name it from its namespace)
)

// message is one message on a pipe, as one frame (writeMessage).
type message struct {
	Op         op
	Argv       [][]byte // bytes, not strings: they need not be UTF-8
	Env        [][]byte
	KillSignal int
	KillGrace  int64
	Foreground bool
	JSONNotes  bool
	Quiet      bool
	Soft       int64 // CLOCK_MONOTONIC
	Hard       int64 // CLOCK_MONOTONIC
	Signal     int
	Reason     string
	Grace      int64
	Pid        int
	Code       int
}

// toBytes and fromBytes carry a command line or an environment through a
// message byte for byte.
func toBytes(ss []string) [][]byte {
	if ss == nil {
		return nil
	}
	bs := make([][]byte, len(ss))
	for i, s := range ss {
		bs[i] = []byte(s)
	}
	return bs
}

func fromBytes(bs [][]byte) []string {
	if bs == nil {
		return nil
	}
	ss := make([]string, len(bs))
	for i, b := range bs {
		ss[i] = string(b)
	}
	return ss
}

// Guardian is the supervisor's handle on a guardian process. Its methods
// are safe for one goroutine at a time.
type Guardian struct {
	stdio Stdio
	want  Containment
	p     *process
	ran   bool   // Run was called
	weak  string // why ContainAuto got no PID namespace; "" if it did
}

// process is one guardian process and the supervisor's ends of its pipes.
type process struct {
	exe    string
	ns     bool // the guardian is the first process of a PID namespace
	stdin  io.Reader
	cmd    *exec.Cmd
	ctrl   *os.File
	status *os.File      // the read end of the status pipe
	ready  chan struct{} // closed when the guardian said it is ready
	nsErr  string        // why the guardian could not set up its namespace, once ready closed
	events chan Event
	done   chan struct{}
	werr   error // the guardian process's wait error, set before done closes
}

// readyWithin bounds how long Ready waits for a guardian to say it is
// ready; it normally did long before, while the lock was acquired, and a
// guardian that does not (a broken etcdlock-guardian) is replaced.
// replacementReadyWithin bounds the wait for the replacement, the running
// binary itself, which is not broken: only a loaded machine makes it slow,
// and failing the run then would turn load into an error.
const (
	readyWithin            = 3 * time.Second
	replacementReadyWithin = 30 * time.Second
)

// Spawn starts a guardian process that waits for its command, so that
// its start-up overlaps the acquisition: Run gives it the command once the
// lock is held, Close ends it if the lock never is. It starts the small
// guardian binary (Binary) when one is beside the running executable and
// the system can start it, else re-executes the running binary, contained
// as c says (see Containment), and makes the caller a child subreaper where
// the system has them: if the guardian dies outside a PID namespace, the
// processes below it move up to the caller, where Kill finds them.
func Spawn(stdio Stdio, c Containment) (*Guardian, error) {
	if err := becomeSubreaper(); err != nil {
		return nil, fmt.Errorf("guardian: cannot become a child subreaper: %w", err)
	}
	g := &Guardian{stdio: stdio, want: c}
	exe := guardianExe()
	p, err := g.start(exe)
	if err != nil && exe != selfExe() && !errors.Is(err, ErrNoNamespace) {
		// A guardian binary that cannot run here (built for another
		// machine, damaged): the running binary serves instead, as it
		// does for one that runs but is not ready (Ready).
		p, err = g.start(selfExe())
	}
	if err != nil {
		return nil, err
	}
	g.p = p
	return g, nil
}

// start starts exe as a guardian process, in a PID namespace unless g
// wants the process tree or was refused one already; under ContainAuto a
// refusal falls back to the tree and is recorded (Containment).
func (g *Guardian) start(exe string) (*process, error) {
	if g.want != ContainTree && g.weak == "" {
		p, err := spawnInNamespace(exe, g.stdio)
		switch {
		case err == nil:
			return p, nil
		case !errors.Is(err, ErrNoNamespace):
			return nil, err // exe cannot run: not the namespace's fault
		case g.want == ContainNamespace:
			return nil, err
		}
		g.weak = refusal(err)
	}
	return spawn(exe, g.stdio, nil)
}

// spawnInNamespace starts exe as the first process of a new PID namespace,
// trying each way the system may allow (namespaceAttrs). An error that
// says the namespace was refused wraps ErrNoNamespace.
func spawnInNamespace(exe string, stdio Stdio) (*process, error) {
	err := errNoNamespaces
	for _, attr := range namespaceAttrs() {
		var p *process
		if p, err = spawn(exe, stdio, attr); err == nil {
			return p, nil
		}
		if !namespaceRefused(err) {
			return nil, err
		}
	}
	why := fmt.Sprintf("the system refused one: %v", errnoOf(err))
	switch {
	case errors.Is(err, syscall.ENOSPC):
		why += ": no user namespace may be created (sysctl user.max_user_namespaces)"
	case errors.Is(err, syscall.EPERM):
		why += ": neither CAP_SYS_ADMIN nor unprivileged user namespaces"
	}
	return nil, &namespaceError{why}
}

// namespaceError says why the guardian has no PID namespace; it wraps
// ErrNoNamespace.
type namespaceError struct{ why string }

func (e *namespaceError) Error() string { return ErrNoNamespace.Error() + ": " + e.why }
func (e *namespaceError) Unwrap() error { return ErrNoNamespace }

// refusal is why err says a namespace could not be had.
func refusal(err error) string {
	if ne, ok := errors.AsType[*namespaceError](err); ok {
		return ne.why
	}
	return err.Error()
}

// errnoOf is the system's error in err, if it has one: what a failed
// start of a process says beyond its path.
func errnoOf(err error) error {
	if errno, ok := errors.AsType[syscall.Errno](err); ok {
		return errno
	}
	return err
}

// Containment reports how the command is held: ContainNamespace or
// ContainTree, and, when ContainAuto fell back to the tree, why.
func (g *Guardian) Containment() (Containment, string) {
	if g.p.ns {
		return ContainNamespace, ""
	}
	return ContainTree, g.weak
}

// Start is Spawn and Run in one.
func Start(stdio Stdio, cfg Config) (*Guardian, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	g, err := Spawn(stdio, ContainAuto)
	if err != nil {
		return nil, err
	}
	if err := g.Run(cfg); err != nil {
		return nil, err
	}
	return g, nil
}

func (cfg *Config) check() error {
	if len(cfg.Argv) == 0 {
		return errors.New("guardian: no command")
	}
	if cfg.Hard.Before(cfg.Soft) {
		return fmt.Errorf("guardian: hard deadline %v is before soft deadline %v", cfg.Hard, cfg.Soft)
	}
	return nil
}

// Run gives the guardian its command, which it starts at once, once the
// guardian is Ready. Events are delivered on Events until the guardian
// exits; the caller must read them. On an error the guardian is gone. Run
// is called once.
func (g *Guardian) Run(cfg Config) error {
	if g.ran {
		return errors.New("guardian: Run called twice")
	}
	g.ran = true
	if err := cfg.check(); err != nil {
		g.p.kill()
		return err
	}
	if err := g.Ready(); err != nil {
		return err
	}
	env := cfg.Env
	if env == nil {
		env = os.Environ()
	}
	err := g.send(message{
		Op:         opConfig,
		Argv:       toBytes(cfg.Argv),
		Env:        toBytes(env), // an empty one is sent as none: the guardian reads none as empty
		KillSignal: int(cfg.KillSignal),
		KillGrace:  int64(cfg.KillGrace),
		Foreground: cfg.Foreground,
		JSONNotes:  cfg.JSONNotes,
		Quiet:      cfg.Quiet,
		Soft:       monoOf(cfg.Soft),
		Hard:       monoOf(cfg.Hard),
	})
	if err != nil {
		g.p.kill()
		return err
	}
	return nil
}

// Ready waits until the guardian is ready for its command, and returns at
// once if it was. A guardian that is gone (killed while the lock was
// acquired, or a guardian binary of another release) or not ready within
// a few seconds (a broken etcdlock-guardian) is replaced, once, by the
// running binary, re-executed; one that could not set up its PID namespace
// is replaced by one without, under ContainAuto. On an error the guardian
// is gone.
func (g *Guardian) Ready() error {
	err := g.p.awaitReady(readyWithin)
	if err == nil {
		return nil
	}
	var p *process
	switch {
	case !errors.Is(err, ErrNoNamespace):
		p, err = g.start(selfExe())
	case g.want == ContainNamespace:
		return err
	default:
		g.weak = refusal(err)
		p, err = spawn(g.p.exe, g.stdio, nil)
	}
	if err != nil {
		return err
	}
	g.p = p
	return g.p.awaitReady(replacementReadyWithin)
}

// Close ends a guardian that was never given a command, and waits for it.
// It does nothing once Run was called.
func (g *Guardian) Close() {
	if g.ran {
		return
	}
	g.ran = true
	g.p.ctrl.Close() // EOF before a command: the guardian exits
	for range g.p.events {
	}
}

// spawn starts exe as a guardian process, which waits for its command;
// with ns, as the first process of the PID namespace ns's clone flags
// make.
func spawn(exe string, stdio Stdio, ns *syscall.SysProcAttr) (*process, error) {
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
	c := &exec.Cmd{
		Path:       exe,
		Args:       []string{"etcdlock", Command},
		Env:        guardianEnv(),
		Stdin:      stdio.Stdin,
		Stdout:     stdio.Stdout,
		Stderr:     stdio.Stderr,
		ExtraFiles: []*os.File{ctrlR, statW}, // fds 3 and 4
		SysProcAttr: &syscall.SysProcAttr{
			// Its own group: signals meant for the job (the terminal's
			// Ctrl-C, kill of the job's group) reach the supervisor, which
			// decides what the command gets; a Ctrl-Z of the job does not
			// stop the guardian's deadline.
			Setpgid: true,
		},
	}
	if ns != nil {
		setNamespace(c.SysProcAttr, ns)
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
	p := &process{exe: exe, ns: ns != nil, stdin: stdio.Stdin, cmd: c, ctrl: ctrlW, status: statR,
		ready: make(chan struct{}), events: make(chan Event, 4), done: make(chan struct{})}
	go p.readStatus(statR) // ends when the guardian exits (its write end closes)
	return p, nil
}

// guardianEnv is the guardian's environment: the supervisor's, with the
// marker, and GOMAXPROCS=1. The guardian mostly waits; one P spares it
// the threads that the runtime starts to run new goroutines on idle Ps
// (1-2 ms of CPU of a 15 ms guardian, measured). The command never sees
// it: Run sends the command's environment over the pipe.
func guardianEnv() []string {
	return append(os.Environ(), EnvMarker+"="+Protocol, "GOMAXPROCS=1") // the last of a name wins (os/exec)
}

// guardianExe is the small guardian binary (Binary) beside the running
// executable if there is one, else the running binary.
func guardianExe() string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), Binary)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return selfExe()
}

// awaitReady waits until the guardian says it is ready; an error if it
// is gone or exits first (it is then waited for) or does not say so
// within the given time (it is then killed).
func (p *process) awaitReady(within time.Duration) error {
	select {
	case <-p.done:
		return fmt.Errorf("%w (%v)", ErrExited, p.werr)
	default:
	}
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-p.ready:
		if p.nsErr != "" {
			<-p.done
			return &namespaceError{p.nsErr}
		}
		return nil
	case <-p.done:
		return fmt.Errorf("%w before it was ready (%v)", ErrExited, p.werr)
	case <-t.C:
		p.kill()
		return fmt.Errorf("guardian: not ready within %v", within)
	}
}

// kill ends a guardian that has no command, with its process group (a
// broken guardian's children hold the status pipe too), and waits for it.
func (p *process) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Process.Kill()
	p.status.Close() // unblocks readStatus whoever else holds the pipe
	<-p.done
}

// readStatus turns the guardian's messages into events, waits for the
// process and closes Events.
func (p *process) readStatus(r *os.File) {
	defer close(p.done)
	defer close(p.events)
	mr := newMessageReader(r)
	for {
		m, err := mr.read()
		if err != nil {
			break
		}
		switch m.Op {
		case opReady:
			p.nsErr = m.Reason
			close(p.ready)
		case opHandBack:
			p.handBack()
		case opStarted:
			p.events <- Event{Started: m.Pid}
		case opStopped:
			p.events <- Event{Stopped: true}
		case opStopping:
			p.events <- Event{Stopping: true}
		case opExit:
			p.events <- Event{Exited: true, Code: m.Code, Signal: syscall.Signal(m.Signal), StartError: m.Reason}
		}
	}
	r.Close()
	p.werr = p.cmd.Wait()
	p.ctrl.Close()
}

// Events delivers the guardian's reports; it is closed when the guardian
// process has exited and been waited for. If it closes without an Exited
// event, the guardian died: the command may still run.
func (g *Guardian) Events() <-chan Event { return g.p.events }

// Err is the guardian process's exit error, valid after Events is closed.
func (g *Guardian) Err() error {
	<-g.p.done
	return g.p.werr
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
	case <-g.p.done:
		return ErrExited
	default:
	}
	if err := writeMessage(g.p.ctrl, m); err != nil {
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
	if err := unix.ClockGettime(clockMonotonic, &ts); err != nil {
		panic(fmt.Sprintf("guardian: CLOCK_MONOTONIC: %v", err)) // cannot fail on Linux
	}
	return ts.Nano()
}
