package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// memberProc is one member process that runCluster started.
type memberProc struct {
	name     string
	endpoint string // client URL, once it serves
	cmd      *exec.Cmd
	exited   chan struct{} // closed once cmd has been waited for
	err      error         // cmd.Wait's result, set before exited is closed
}

// memberStart is what a member's goroutine says once the member serves
// (err nil) or cannot.
type memberStart struct {
	p   *memberProc
	err error
}

// runCluster starts o.Members member processes — this program again, each
// serving one member with the production defaults (fsync on, 100 ms
// heartbeat, 1 s election timeout) — and serves until ctx ends, then stops
// them. Its first stdout line lists the client URLs, comma-separated,
// once every member serves; then one line per member: name, pid, client
// URL. A member that dies is reported on stderr and not restarted, so that
// failover can be tried by killing one (the cluster serves while a majority
// runs).
func runCluster(ctx context.Context, o *options) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find this program to start the members: %w", err)
	}
	base, release, err := clusterDir(o.DataDir)
	if err != nil {
		return err
	}
	defer release()
	lay, err := clusterLayout(o.DataDir, o.Members)
	if err != nil {
		return err
	}
	if o.DataDir != "" {
		if err := waitForEarlierMembers(ctx, o.DataDir, o.Members); err != nil {
			if ctx.Err() != nil {
				return nil // interrupted
			}
			return err
		}
	}
	procs := make([]*memberProc, o.Members)
	for i := range procs {
		procs[i] = &memberProc{name: fmt.Sprintf("m%d", i)}
	}
	defer stopMembers(procs)
	ready := make(chan memberStart, len(procs))
	for i, p := range procs {
		err := p.start(ready, self, "--member-name", p.name, "--initial-cluster", strings.Join(lay.initial, ","),
			"--cluster-token", lay.token, "--listen", lay.clients[i], "--data-dir", base, "--log-level", o.LogLevel)
		if err != nil {
			return err
		}
	}
	if serving, err := awaitMembers(ctx, procs, ready); !serving {
		return err
	}
	announceMembers(procs)
	reportExits(ctx, procs)
	return nil
}

// clusterDir is the members' data directory: dataDir, locked until release
// so that another etcdlock dev on it, a cluster or a single member, fails
// at once rather than record a layout of its own over this one's; or, if
// dataDir is "", a temporary directory that release removes.
func clusterDir(dataDir string) (dir string, release func(), err error) {
	if dataDir == "" {
		dir, err := os.MkdirTemp("", "etcdlock-dev-")
		if err != nil {
			return "", nil, err
		}
		return dir, func() { os.RemoveAll(dir) }, nil
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", nil, fmt.Errorf("--data-dir: %w", err)
	}
	lock, err := lockDataDir(dataDir, "")
	if err != nil {
		return "", nil, err
	}
	return dataDir, func() { lock.Close() }, nil
}

// start starts p as self with args. Its goroutine sends p's memberStart
// on ready (which has room for it), then waits for the process and closes
// p.exited; stopMembers ends the process.
func (p *memberProc) start(ready chan<- memberStart, self string, args ...string) error {
	p.cmd = exec.Command(self, args...)
	dieWithParent(p.cmd)
	p.cmd.Stderr = os.Stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start member %s: %w", p.name, err)
	}
	p.exited = make(chan struct{})
	go func() {
		// The member prints its endpoint once it serves.
		line, err := bufio.NewReader(out).ReadString('\n')
		p.endpoint = strings.TrimSpace(line)
		if err != nil || p.endpoint == "" {
			ready <- memberStart{p, fmt.Errorf("member %s did not start (%v)", p.name, err)}
		} else {
			ready <- memberStart{p, nil}
		}
		_, _ = io.Copy(io.Discard, out)
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	return nil
}

// awaitMembers waits until every one of procs serves: serving is false if
// one could not start (err) or ctx ended first (err nil, said on stderr).
func awaitMembers(ctx context.Context, procs []*memberProc, ready <-chan memberStart) (serving bool, err error) {
	started := map[*memberProc]bool{}
	for range procs {
		select {
		case st := <-ready:
			if st.err != nil {
				return false, st.err
			}
			started[st.p] = true
		case <-ctx.Done():
			var waiting []string
			for _, p := range procs {
				if !started[p] {
					waiting = append(waiting, p.name)
				}
			}
			fmt.Fprintf(os.Stderr, "etcdlock dev: stopped before the cluster served (not serving yet: %s)\n", strings.Join(waiting, ", "))
			return false, nil
		}
	}
	return true, nil
}

// announceMembers prints the serving cluster: its endpoints and each
// member on stdout, how to stop it on stderr.
func announceMembers(procs []*memberProc) {
	eps := make([]string, len(procs))
	for i, p := range procs {
		eps[i] = p.endpoint
	}
	fmt.Println(strings.Join(eps, ","))
	for _, p := range procs {
		fmt.Printf("%s %d %s\n", p.name, p.cmd.Process.Pid, p.endpoint)
	}
	fmt.Fprintf(os.Stderr, "etcdlock dev: %d-member etcd cluster serving on %s; stop with Ctrl-C\n", len(procs), strings.Join(eps, ","))
}

// reportExits says on stderr which member exits until ctx ends, then that
// the cluster stops.
func reportExits(ctx context.Context, procs []*memberProc) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-p.exited:
				fmt.Fprintf(os.Stderr, "etcdlock dev: member %s (pid %d) exited: %v\n", p.name, p.cmd.Process.Pid, p.err)
			case <-ctx.Done():
			}
		}()
	}
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "etcdlock dev: stopping the cluster")
	wg.Wait()
}

// stopMembers sends every running member SIGTERM and waits for them, with
// SIGKILL for those still running after 10 s (a member still starting,
// waiting for its peers, does not stop on SIGTERM).
func stopMembers(procs []*memberProc) {
	for _, p := range procs {
		if p != nil && p.exited != nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range procs {
		if p == nil || p.exited == nil {
			continue
		}
		select {
		case <-p.exited:
		case <-deadline.Done(): // stays done: every member after it is killed at once
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
}

// errInUse is lockDataDir's error for a data directory whose lock another
// etcdlock dev holds.
var errInUse = errors.New("is in use by another etcdlock dev")

// earlierMembersWait bounds waitForEarlierMembers: a member stops within
// about 10 s (stopMembers), and seconds later when its parent was killed.
const earlierMembersWait = 20 * time.Second

// waitForEarlierMembers waits until no member of an earlier run on dir
// still holds its data's lock, saying so once per member it waits for:
// the members of a parent killed with SIGKILL take seconds to stop, and a
// restart meanwhile would have its own members refused. It fails with
// the lock's error after earlierMembersWait, or with ctx's.
func waitForEarlierMembers(ctx context.Context, dir string, n int) error {
	deadline := time.Now().Add(earlierMembersWait)
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		for said := false; ; {
			f, err := lockDataDir(dir, name)
			if err == nil {
				if f != nil {
					f.Close()
				}
				break
			}
			if !errors.Is(err, errInUse) {
				return err
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("member %s of an earlier run on %s did not stop within %v (frozen? find it with: pgrep -f 'member-name %s .*data-dir %s'): %w",
					name, dir, earlierMembersWait, name, dir, err)
			}
			if !said {
				fmt.Fprintf(os.Stderr, "etcdlock dev: waiting for member %s of an earlier run on %s to stop\n", name, dir)
				said = true
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}
