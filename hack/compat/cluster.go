//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/embedded"
)

// cluster is a cluster of member processes that startCluster started.
type cluster struct {
	dir       string
	endpoints []string
	version   string // as the members report it
	members   []*memberProc
}

type memberProc struct {
	spec   memberSpec
	log    string // its stdout and stderr
	cmd    *exec.Cmd
	exited chan struct{}
}

// startCluster starts n members of path (with args before each member's
// own) on free loopback ports, in a new directory under base, and returns
// once every member reports the cluster's leader and a write went through.
func startCluster(ctx context.Context, s server, path string, args []string, n int, base string) (*cluster, error) {
	dir, err := os.MkdirTemp(base, "etcd-"+s.version+"-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir}
	clients, err := embedded.FreeLoopbackAddrs("127.0.0.1", n)
	if err != nil {
		return nil, err
	}
	peers, err := embedded.FreeLoopbackAddrs("127.0.0.1", n, clients...)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=http://%s", i, peers[i]))
	}
	token := make([]byte, 8)
	_, _ = rand.Read(token)
	for i := range n {
		spec := memberSpec{name: fmt.Sprintf("m%d", i), dir: filepath.Join(dir, fmt.Sprintf("m%d", i)),
			client: "http://" + clients[i], peer: "http://" + peers[i],
			initialCluster: strings.Join(initial, ","), token: "compat-" + hex.EncodeToString(token)}
		c.endpoints = append(c.endpoints, spec.client)
		m := &memberProc{spec: spec, log: spec.dir + ".log"}
		if err := m.start(path, append(append([]string(nil), args...), s.args(spec)...)); err != nil {
			c.stop()
			return nil, err
		}
		c.members = append(c.members, m)
	}
	if err := c.waitReady(ctx); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (m *memberProc) start(path string, args []string) error {
	out, err := os.Create(m.log)
	if err != nil {
		return err
	}
	defer out.Close()
	m.cmd = exec.Command(path, args...)
	m.cmd.Stdout, m.cmd.Stderr = out, out
	// A member dies with this program, even on SIGKILL.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", m.spec.name, err)
	}
	m.exited = make(chan struct{})
	go func() {
		_ = m.cmd.Wait()
		close(m.exited)
	}()
	return nil
}

// waitReady waits until every member answers with the leader's ID and a
// write commits, or a member exits, for up to a minute.
func (c *cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	for {
		if err := c.exitedEarly(); err != nil {
			return err
		}
		if v, ok := c.serving(ctx, cli); ok {
			c.version = v
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cluster did not serve within a minute:\n%s", c.logTails())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serving reports whether every member knows the leader and a write
// commits, with the members' version.
func (c *cluster) serving(ctx context.Context, cli *clientv3.Client) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	version := ""
	for _, ep := range c.endpoints {
		st, err := cli.Status(ctx, ep)
		if err != nil || st.Leader == 0 {
			return "", false
		}
		version = st.Version
	}
	_, err := cli.Put(ctx, "/compat/ready", "1")
	return version, err == nil
}

// exitedEarly returns an error naming a member that has exited.
func (c *cluster) exitedEarly() error {
	for _, m := range c.members {
		select {
		case <-m.exited:
			return fmt.Errorf("member %s exited: %v\n%s", m.spec.name, m.cmd.ProcessState, c.logTails())
		default:
		}
	}
	return nil
}

// logTails is the end of every member's log.
func (c *cluster) logTails() string {
	var b strings.Builder
	for _, m := range c.members {
		out, _ := os.ReadFile(m.log)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Fprintf(&b, "--- %s (%s):\n%s\n", m.spec.name, m.log, strings.Join(lines, "\n"))
	}
	return b.String()
}

// stop ends every member, SIGTERM first, SIGKILL after 10 s, and removes
// the cluster's directory.
func (c *cluster) stop() {
	for _, m := range c.members {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, m := range c.members {
		select {
		case <-m.exited:
		case <-time.After(10 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.exited
		}
	}
	os.RemoveAll(c.dir)
}
