//go:build linux

package ctrlmanager_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/kubelock/internal/kubetest"
)

// The environment of a paused-leader child: the test binary, run again
// with pausedChildEnv set to the candidate's identity, is a controller
// process of its own (see pausedChild).
const (
	pausedChildEnv     = "KUBELOCK_PAUSED_CHILD"
	pausedEndpointsEnv = "KUBELOCK_PAUSED_ENDPOINTS"
	pausedPrefixEnv    = "KUBELOCK_PAUSED_PREFIX"
	pausedResourceEnv  = "KUBELOCK_PAUSED_RESOURCE"
	pausedDeafEnv      = "KUBELOCK_PAUSED_DEAF"
)

// A leader process frozen (SIGSTOP) past its term and resumed (SIGCONT)
// once the next leader has written, as the package documents it: the
// frozen leader's leader-only Runnable begins at most one unit of work
// after it resumes (it finishes the unit it was in, or begins one more
// before it sees its context end), and none of its fenced writes commits
// in the next leader's term. Each round runs two controller processes, a
// controller-runtime manager each, set up with Options and doing units of
// work fenced with etcdfence; KUBELOCK_PAUSE_ROUNDS sets how many rounds
// (default 2).
func TestPausedLeaderDoesAtMostOneMoreUnit(t *testing.T) {
	t.Parallel()
	rounds := kubetest.EnvInt(t, "KUBELOCK_PAUSE_ROUNDS", 2)
	var units, refused int
	for i := range rounds {
		beyond, r := pausedRound(t, i, false)
		if beyond > 1 {
			t.Errorf("round %d: the frozen leader began %d units of work after it resumed, in the next leader's term; want at most 1", i, beyond)
		}
		units += min(beyond, 1)
		refused += r
	}
	t.Logf("%d rounds: %d with a unit begun after the resume; %d writes of the frozen leader refused", rounds, units, refused)
}

// The negative control: a Runnable that goes on for ten more units after
// its context ended, as one that does not look at it would; the check
// above sees them, and the fence refuses every write of theirs in the
// next leader's term.
func TestPausedLeaderDeafRunnableIsFenced(t *testing.T) {
	t.Parallel()
	beyond, refused := pausedRound(t, 0, true)
	t.Logf("the frozen leader began %d units of work after it resumed; %d of its writes refused", beyond, refused)
	if beyond <= 1 {
		t.Errorf("a Runnable deaf to its context began %d units after it resumed: the check cannot fail", beyond)
	}
	if refused == 0 {
		t.Error("no write of the deaf Runnable was refused")
	}
}

// pausedRound freezes the leader of two controller processes (their
// Runnables deaf to their context if deaf) until the next
// leader has written, resumes it, and returns how many units the frozen
// leader began after it resumed and how many of its writes were refused.
// It fails t if a write of the frozen leader committed in the next term.
func pausedRound(t *testing.T, round int, deaf bool) (beyond, refused int) {
	name := strings.ReplaceAll(t.Name(), "/", "_")
	prefix := fmt.Sprintf("/ctrlmanager/%s/%d/", name, round)
	resource := fmt.Sprintf("/ctrlmanager-resource/%s/%d", name, round)
	a := startPausedChild(t, fmt.Sprintf("a%d", round), prefix, resource, deaf)
	first := a.waitFor(t, "a's first unit", func(l pausedLine) bool { return l.event == "begin" })
	b := startPausedChild(t, fmt.Sprintf("b%d", round), prefix, resource, deaf)

	// Somewhere in a unit of work.
	time.Sleep(time.Duration(rand.Intn(40)) * time.Millisecond)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitFor(t, nil, time.Minute, "a frozen", func() bool { return stopped(t, a.cmd.Process.Pid) })
	next := b.waitFor(t, "b's first write", func(l pausedLine) bool { return l.event == "wrote" })
	resumed := monotonic()
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	a.waitExit(t)
	b.stop(t)

	if next.token <= first.token {
		t.Errorf("round %d: b's token %d is not above a's %d", round, next.token, first.token)
	}
	for _, l := range a.all() {
		if l.at > resumed {
			t.Logf("round %d: a after the resume: +%v %s unit %d token %d rev %d %s", round,
				time.Duration(l.at-resumed).Round(time.Millisecond), l.event, l.unit, l.token, l.rev, l.detail)
		}
		switch {
		case l.event == "begin" && l.at > resumed:
			beyond++
		case l.event == "wrote" && l.rev >= next.token:
			t.Errorf("round %d: a's write of unit %d (token %d) committed at revision %d, in b's term (token %d)",
				round, l.unit, l.token, l.rev, next.token)
		case l.event == "refused":
			refused++
		}
	}
	return beyond, refused
}

// pausedChildProc is a running paused-leader child and the lines it
// printed.
type pausedChildProc struct {
	who    string
	cmd    *exec.Cmd
	stderr bytes.Buffer
	read   chan struct{} // closed when stdout is read to its end

	mu     sync.Mutex
	lines  []pausedLine
	change chan struct{}
}

// pausedLine is one line of a child: an event of its Runnable or of its
// manager.
type pausedLine struct {
	at     int64  // CLOCK_MONOTONIC, ns
	event  string // begin, wrote, refused, failed (a unit's write); exit
	unit   int
	token  int64 // the term's
	rev    int64 // wrote: the revision of the write
	detail string
}

func startPausedChild(t *testing.T, who, prefix, resource string, deaf bool) *pausedChildProc {
	t.Helper()
	c := &pausedChildProc{who: who, read: make(chan struct{}), change: make(chan struct{}, 1)}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), pausedChildEnv+"="+who,
		pausedEndpointsEnv+"="+strings.Join(cluster.Endpoints(), ","),
		pausedPrefixEnv+"="+prefix, pausedResourceEnv+"="+resource, pausedDeafEnv+"="+strconv.FormatBool(deaf))
	c.cmd.Stderr = &c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go c.readLines(t, out)
	t.Cleanup(func() {
		// A child still running at the end (the test failed): resumed
		// and killed, then reaped.
		_ = c.cmd.Process.Signal(syscall.SIGCONT)
		_ = c.cmd.Process.Kill()
		<-c.read
		_ = c.cmd.Wait()
		if t.Failed() {
			t.Logf("%s's stderr:\n%s", c.who, c.stderr.String())
		}
	})
	return c
}

// readLines reads the child's stdout until its end; the child owns the
// goroutine's end (it exits, or the cleanup kills it).
func (c *pausedChildProc) readLines(t *testing.T, out io.Reader) {
	defer close(c.read)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		l, err := parsePausedLine(sc.Text())
		if err != nil {
			t.Errorf("%s: %v", c.who, err)
			continue
		}
		c.mu.Lock()
		c.lines = append(c.lines, l)
		c.mu.Unlock()
		select {
		case c.change <- struct{}{}:
		default:
		}
	}
}

// waitFor returns the first line for which match holds, waiting for it
// within a bound.
func (c *pausedChildProc) waitFor(t *testing.T, what string, match func(pausedLine) bool) pausedLine {
	t.Helper()
	var found pausedLine
	kubetest.WaitFor(t, c.change, time.Minute, what, func() bool {
		for _, l := range c.all() {
			if match(l) {
				found = l
				return true
			}
		}
		return false
	})
	return found
}

func (c *pausedChildProc) all() []pausedLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]pausedLine(nil), c.lines...)
}

// waitExit waits, within a bound, for the child to exit on its own: its
// manager's Start returned, as it does once the elector lost.
func (c *pausedChildProc) waitExit(t *testing.T) {
	t.Helper()
	c.waitFor(t, c.who+"'s exit", func(l pausedLine) bool { return l.event == "exit" })
	<-c.read
}

// stop ends the child as a graceful shutdown does, and waits for it.
func (c *pausedChildProc) stop(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.waitExit(t)
}

func parsePausedLine(s string) (pausedLine, error) {
	f := strings.SplitN(s, " ", 6)
	if len(f) < 6 {
		return pausedLine{}, fmt.Errorf("malformed line %q", s)
	}
	var l pausedLine
	var err error
	nums := []*int64{&l.at, nil, nil, &l.token, &l.rev}
	for i, p := range nums {
		if p == nil {
			continue
		}
		if *p, err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return l, fmt.Errorf("line %q: %w", s, err)
		}
	}
	l.event, l.detail = f[1], f[5]
	if l.unit, err = strconv.Atoi(f[2]); err != nil {
		return l, fmt.Errorf("line %q: %w", s, err)
	}
	return l, nil
}

// stopped reports whether every thread of process pid is stopped.
func stopped(t *testing.T, pid int) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		t.Fatalf("threads of %d: %v", pid, err)
	}
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			return false // a thread that just ended
		}
		// The state follows the command's closing parenthesis.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}
