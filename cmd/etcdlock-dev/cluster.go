package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcdlock/etcdlock/pkg/embedded"
)

// memberProc is one member process that runCluster started.
type memberProc struct {
	name     string
	endpoint string // client URL, once it serves
	cmd      *exec.Cmd
	exited   chan struct{} // closed once cmd has been waited for
	err      error         // cmd.Wait's result, set before exited is closed
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
	base := o.DataDir
	if base == "" {
		if base, err = os.MkdirTemp("", "etcdlock-dev-"); err != nil {
			return err
		}
		defer os.RemoveAll(base)
	}
	if o.DataDir != "" {
		// The directory's lock, held while the cluster runs: another
		// etcdlock dev on it, a cluster or a single member, fails at once
		// rather than record a layout of its own over this one's.
		if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
			return fmt.Errorf("--data-dir: %w", err)
		}
		lock, err := lockDataDir(o.DataDir, "")
		if err != nil {
			return err
		}
		defer lock.Close()
	}
	initial, token, err := clusterLayout(o.DataDir, o.Members)
	if err != nil {
		return err
	}
	procs := make([]*memberProc, o.Members)
	clients := make([]string, o.Members)
	for i := range procs {
		if clients[i], err = embedded.FreeLoopbackAddr("127.0.0.1"); err != nil {
			return err
		}
		procs[i] = &memberProc{name: fmt.Sprintf("m%d", i)}
	}
	defer stopMembers(procs)
	ready := make(chan error, len(procs))
	for i, p := range procs {
		p.cmd = exec.Command(self, "--member-name", p.name, "--initial-cluster", strings.Join(initial, ","),
			"--cluster-token", token, "--listen", clients[i], "--data-dir", base, "--log-level", o.LogLevel)
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
				ready <- fmt.Errorf("member %s did not start (%v)", p.name, err)
			} else {
				ready <- nil
			}
			_, _ = io.Copy(io.Discard, out)
			p.err = p.cmd.Wait()
			close(p.exited)
		}()
	}
	for range procs {
		select {
		case err := <-ready:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
	eps := make([]string, len(procs))
	for i, p := range procs {
		eps[i] = p.endpoint
	}
	fmt.Println(strings.Join(eps, ","))
	for _, p := range procs {
		fmt.Printf("%s %d %s\n", p.name, p.cmd.Process.Pid, p.endpoint)
	}
	fmt.Fprintf(os.Stderr, "etcdlock dev: %d-member etcd cluster serving on %s; stop with Ctrl-C\n", len(procs), strings.Join(eps, ","))
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
	return nil
}

// stopMembers sends every running member SIGTERM and waits for it, with
// SIGKILL after 10 s.
func stopMembers(procs []*memberProc) {
	for _, p := range procs {
		if p == nil || p.exited == nil {
			continue
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
}
