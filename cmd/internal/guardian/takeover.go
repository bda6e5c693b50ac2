//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package guardian

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// StopAck bounds how long the supervisor waits for the guardian to
// acknowledge a Stop (Event.Stopping) before it stops trusting it: a
// guardian that is frozen (SIGSTOP, a debugger) or hung cannot kill the
// command, so the supervisor kills the guardian and the command itself
// (Kill).
const StopAck = time.Second

// killWithin bounds Kill's SIGKILL rounds: a process in uninterruptible
// sleep may outlast them.
const killWithin = 10 * time.Second

// ErrSurvivors is returned by Kill when processes below the supervisor
// were still alive after every round of SIGKILL.
var ErrSurvivors = errors.New("guardian: processes survived SIGKILL")

// Kill kills the guardian with SIGKILL, if it still runs, and then every
// process below the calling process: Spawn made the caller a child
// subreaper, so a process the command started, in whatever session or
// group, moves up to the caller when the guardian dies. It waits for
// Events to close, then reaps every process it killed. The caller must
// have no other children it waits for.
func (g *Guardian) Kill() error {
	select {
	case <-g.p.done:
	default:
		_ = g.p.cmd.Process.Kill()
	}
	for range g.p.events { // until the guardian is waited for
	}
	self := os.Getpid()
	end := time.Now().Add(killWithin)
	for {
		signalBelow(self, unix.SIGKILL)
		reapAll()
		n := len(below(self))
		if n == 0 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%w: %d below etcdlock after %v", ErrSurvivors, n, killWithin)
		}
		time.Sleep(reapEvery)
	}
}

// reapAll reaps every child that has exited, without waiting.
func reapAll() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
	}
}
