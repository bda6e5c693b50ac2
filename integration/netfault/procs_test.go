package netfault

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// proc is one process the harness runs in a node's namespace.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process was waited for
	err  error         // Wait's result, set before done is closed
}

// startIn starts bin with args in nd's namespace (ip netns exec execs
// it, so the pid is bin's), killed if the harness dies.
func startIn(nd *node, stdout, stderr io.Writer, bin string, args ...string) (*proc, error) {
	return startInEnv(nd, nil, stdout, stderr, bin, args...)
}

// startInEnv is startIn with the environment env (nil: the harness's).
func startInEnv(nd *node, env []string, stdout, stderr io.Writer, bin string, args ...string) (*proc, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", nd.ns, bin}, args...)...)
	cmd.Stdout, cmd.Stderr, cmd.Env = stdout, stderr, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// signal signals the process unless it was waited for (its pid may be
// another process's by then).
func (p *proc) signal(s syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(s)
	}
}

// stop ends the process: SIGTERM, and SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.signal(syscall.SIGKILL)
		<-p.done
	}
}

// kill ends the process at once.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	p.signal(syscall.SIGCONT)
	<-p.done
}

// binaries are the programs the harness runs, built once.
type binaries struct {
	etcdlock, member, holder, probe, relay string
}

// build builds etcdlock (with etcdlock-guardian beside it, which run
// starts) and the harness's member, holder, probe and relay into dir.
func build(dir string) (*binaries, error) {
	b := &binaries{}
	for _, c := range []struct {
		out *string
		pkg string
	}{
		{&b.etcdlock, "github.com/etcdlock/etcdlock/cmd/etcdlock"},
		{nil, "github.com/etcdlock/etcdlock/cmd/etcdlock-guardian"},
		{&b.member, "github.com/etcdlock/etcdlock/integration/netfault/member"},
		{&b.holder, "github.com/etcdlock/etcdlock/integration/netfault/holder"},
		{&b.probe, "github.com/etcdlock/etcdlock/integration/netfault/probe"},
		{&b.relay, "github.com/etcdlock/etcdlock/integration/netfault/relay"},
	} {
		out := filepath.Join(dir, filepath.Base(c.pkg))
		if msg, err := exec.Command("go", "build", "-o", out, c.pkg).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %v\n%s", c.pkg, err, msg)
		}
		if c.out != nil {
			*c.out = out
		}
	}
	return b, nil
}

// cluster is three etcd members, one per member node.
type cluster struct {
	t       *testing.T
	bins    *binaries
	dir     string
	nodes   []*node
	procs   []*proc
	args    [][]string
	clients []string // client URLs, in member order
}

// startCluster starts a member on each of nodes and returns once all
// serve; every member is stopped when t ends.
func startCluster(t *testing.T, ctx context.Context, bins *binaries, dir string, nodes ...*node) *cluster {
	t.Helper()
	c := &cluster{t: t, bins: bins, dir: dir, nodes: nodes, procs: make([]*proc, len(nodes))}
	var initial []string
	for _, nd := range nodes {
		initial = append(initial, fmt.Sprintf("%s=http://%s:2380", nd.name, nd.ip))
		c.clients = append(c.clients, fmt.Sprintf("http://%s:2379", nd.ip))
	}
	for _, nd := range nodes {
		c.args = append(c.args, []string{"--name", nd.name, "--dir", filepath.Join(dir, nd.name),
			"--client", fmt.Sprintf("http://%s:2379", nd.ip), "--peer", fmt.Sprintf("http://%s:2380", nd.ip),
			"--initial-cluster", strings.Join(initial, ","), "--token", filepath.Base(dir)})
	}
	t.Cleanup(c.close)
	ready := make(chan error, len(nodes))
	for i := range nodes {
		if err := c.start(i, ready); err != nil {
			t.Fatal(err)
		}
	}
	for range nodes {
		select {
		case err := <-ready:
			if err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatalf("the cluster did not serve: %v", ctx.Err())
		}
	}
	return c
}

// start starts member i; ready receives nil once it serves, or why not.
func (c *cluster) start(i int, ready chan<- error) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	// The member's log, appended across restarts, stays in the data
	// directory's parent for a failing run to read.
	lg, err := os.OpenFile(filepath.Join(c.dir, c.nodes[i].name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		r.Close()
		w.Close()
		return err
	}
	p, err := startIn(c.nodes[i], w, lg, c.bins.member, c.args[i]...)
	w.Close()
	lg.Close()
	if err != nil {
		r.Close()
		return err
	}
	c.procs[i] = p
	go func() {
		defer r.Close()
		line, err := bufio.NewReader(r).ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			ready <- fmt.Errorf("member %s did not start: %q %v", c.nodes[i].name, line, err)
		} else {
			ready <- nil
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	return nil
}

// restart starts member i again (after kill) and waits until it serves.
func (c *cluster) restart(ctx context.Context, i int) error {
	ready := make(chan error, 1)
	if err := c.start(i, ready); err != nil {
		return err
	}
	select {
	case err := <-ready:
		return err
	case <-ctx.Done():
		return fmt.Errorf("member %s did not serve again: %w", c.nodes[i].name, ctx.Err())
	}
}

func (c *cluster) endpoints() string { return strings.Join(c.clients, ",") }

func (c *cluster) close() {
	for _, p := range c.procs {
		if p != nil {
			p.stop(10 * time.Second)
		}
	}
}
