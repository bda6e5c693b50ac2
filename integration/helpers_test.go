package integration

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.uber.org/zap/zaptest"

	"github.com/etcdlock/etcdlock/pkg/detached"
	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// The helpers every suite of this package shares, in one place, grouped:
// the clusters, clients and sessions; waiting on etcd; TLS certificates;
// the etcdlock binary and runs of it; processes and their output;
// goroutines; the long modes' settings and totals table. TestMain, which
// builds the binary and starts the shared cluster, is in main_test.go.
//
// Machinery that serves one suite only lives beside that suite's tests:
//
//   - the fault suite (TestFaultSuite, TestChaos): its harness (runChaos,
//     the faults, the key observer) in chaos_harness_test.go, its workers
//     in chaos_worker_test.go, the porcupine model in chaos_model_test.go,
//     the checks in chaos_check_test.go, its totals in chaos_test.go;
//   - the session-reuse checker (TestReuseChecker, TestReuseLong): its run
//     (runReuse, the deletion observer) in reuse_run_test.go, its workload
//     in reuse_worker_test.go, reuse_release_test.go,
//     reuse_election_test.go and reuse_operator_test.go, its record in
//     reuse_record_test.go, its checks in reuse_check_test.go, its
//     goroutine labels in reuse_leak_test.go, its totals in reuse_test.go;
//   - the guardian tests (linux only): runGuarded, nextHolder and the
//     leftover processes in cli_guard_test.go;
//   - the tests in cli_frozen_test.go: the freezer proxy in
//     freezer_test.go;
//   - the terminal tests (linux only): the pseudo-terminal in
//     cli_tty_test.go.

// The shared cluster, other clusters, contexts and key prefixes.

// shared is one single-member etcd for the scenarios that do not stop or
// restart servers; each test uses its own key prefix. TestMain starts and
// closes it.
var shared *etcdtest.Shared

// chaosCluster starts the 3-member cluster the fault runs use: fast raft
// settings so that elections and lease expiry happen within seconds.
func chaosCluster(t *testing.T) *embedded.Cluster {
	return etcdtest.Cluster(t, embedded.WithMembers(3), embedded.WithRaftTiming(50*time.Millisecond, 500*time.Millisecond))
}

// testCtx is a context canceled after d or when t ends.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// prefixOf is the test's own key prefix: /it/<test name>/.
func prefixOf(t *testing.T) string {
	return "/it/" + strings.ReplaceAll(t.Name(), "/", "_") + "/"
}

// Clients, sessions and locks of the library under test.

// proxied returns a client that reaches the first endpoint through a proxy
// the test controls.
func proxied(t *testing.T, c *etcdtest.Shared) (*clientv3.Client, proxy.Server) {
	p, url := etcdtest.Proxy(t, c.Endpoints()[0])
	return etcdtest.Client(t, url), p
}

// session opens a session on cli under the test's prefix, owned by owner,
// with a 3 s TTL and a test logger; opts come last and so override those.
// It is closed when t ends.
func session(t *testing.T, cli *clientv3.Client, owner string, opts ...lock.SessionOption) *lock.Session {
	t.Helper()
	opts = append([]lock.SessionOption{
		lock.WithPrefix(prefixOf(t)), lock.WithOwner(owner), lock.WithTTL(3 * time.Second),
		lock.WithLogger(zaptest.NewLogger(t).Named(owner)), lock.WithCleanupTimeout(time.Second),
	}, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := lock.NewSession(ctx, cli, opts...)
	if err != nil {
		t.Fatalf("session %s: %v", owner, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

// newDetached returns detached.Locks under the test's prefix.
func newDetached(t *testing.T, cli *clientv3.Client) *detached.Locks {
	t.Helper()
	d, err := detached.New(cli, lock.WithPrefix(prefixOf(t)), lock.WithCleanupTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// acquire acquires name on s, failing t if it cannot.
func acquire(t *testing.T, ctx context.Context, s *lock.Session, name string) *lock.Lock {
	t.Helper()
	l, err := s.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", name, err)
	}
	return l
}

// lostAt waits for l to be lost and returns when the holder noticed.
func lostAt(t *testing.T, l *lock.Lock, within time.Duration) time.Time {
	t.Helper()
	select {
	case <-l.Context().Done():
	case <-time.After(within):
		t.Fatalf("the holder of %s still believes it holds %q after %v", l.Key(), l.Name(), within)
	}
	var lost *lock.LostError
	if !errors.As(l.Err(), &lost) {
		t.Fatalf("lost lock's Err() = %v, want *LostError", l.Err())
	}
	return lost.At
}

// holder returns the current holder key and token of name, or "" and 0.
func holder(t *testing.T, ctx context.Context, cli *clientv3.Client, name string) (string, int64) {
	t.Helper()
	resp, err := cli.Get(ctx, prefixOf(t)+name+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0
	}
	return string(resp.Kvs[0].Key), resp.Kvs[0].CreateRevision
}

// Waiting on etcd.

// waitQueued waits until n keys exist under name.
func waitQueued(t *testing.T, ctx context.Context, cli *clientv3.Client, name string, n int) {
	t.Helper()
	etcdtest.Eventually(t, 10*time.Second, func() bool {
		resp, err := cli.Get(ctx, prefixOf(t)+name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == int64(n)
	}, "contenders did not queue")
}

// reconnected waits until cli can reach etcd again after a fault. The probe
// is an empty transaction: unlike a Get, the client never retries it
// internally, so success means the connection itself is healthy again.
func reconnected(t *testing.T, ctx context.Context, cli *clientv3.Client) {
	t.Helper()
	etcdtest.Eventually(t, 20*time.Second, func() bool {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := cli.Txn(c).Commit()
		return err == nil
	}, "client did not reconnect")
}

// retry calls fn until it returns nil, as a caller would after transient
// errors (a connection reset by a fault), failing t after 10 attempts.
func retry(t *testing.T, fn func() error) {
	t.Helper()
	var err error
	for range 10 {
		if err = fn(); err == nil {
			return
		}
		t.Logf("retrying after: %v", err)
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("still failing after 10 attempts: %v", err)
}

// TLS: a CA that issues certificates for 127.0.0.1.

// testCA is a certificate authority for a test's TLS: its certificate
// and key, and the file its certificate is in.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

// newCA creates a CA and writes its certificate to dir/ca.pem.
func newCA(t *testing.T, dir string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcdlock test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(dir, "ca.pem")
	writePEM(t, file, "CERTIFICATE", der)
	return &testCA{cert: cert, key: key, file: file}
}

// issue writes a certificate and key for 127.0.0.1 signed by the CA.
func (ca *testCA) issue(t *testing.T, dir, name string, server bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if server {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The etcdlock binary: built once by TestMain, run against an endpoint
// with the test's prefix.

// cliPath is the etcdlock binary built once by TestMain.
var cliPath string

// buildCLI builds etcdlock, etcdlock-dev (which `etcdlock dev` runs) and
// etcdlock-guardian (which `etcdlock run` starts when it is beside it)
// into dir.
func buildCLI(dir string) error {
	cliPath = filepath.Join(dir, "etcdlock")
	for _, cmd := range []string{"etcdlock", "etcdlock-dev", "etcdlock-guardian"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, cmd), "github.com/etcdlock/etcdlock/cmd/"+cmd).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build %s: %v\n%s", cmd, err, out)
		}
	}
	return nil
}

// cliResult is how a cli run ended.
type cliResult struct {
	code           int
	stdout, stderr string
}

// cli runs the binary against endpoint with the test's prefix and returns
// its exit code and output. extraEnv entries are KEY=VALUE.
func cli(t *testing.T, endpoint string, extraEnv []string, args ...string) cliResult {
	t.Helper()
	cmd := cliCommand(t, endpoint, extraEnv, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := cliResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	default:
		t.Fatalf("etcdlock %v: %v", args, err)
	}
	return res
}

// cliCommand is the command cli runs, not started: the binary against
// endpoint with the test's prefix, in cleanEnv plus extraEnv, killed after
// two minutes or when t ends.
func cliCommand(t *testing.T, endpoint string, extraEnv []string, args ...string) *exec.Cmd {
	ctx := testCtx(t, 2*time.Minute)
	all := append([]string{"--endpoints", endpoint, "--prefix", prefixOf(t)}, args...)
	cmd := exec.CommandContext(ctx, cliPath, all...)
	cmd.Env = append(cleanEnv(), extraEnv...)
	return cmd
}

// cleanEnv is the test's environment without ETCDLOCK_/ETCDCTL_ settings.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCDLOCK_") && !strings.HasPrefix(kv, "ETCDCTL_") {
			env = append(env, kv)
		}
	}
	return env
}

// exitCodeOf is the exit code in a Wait error: 0 for nil, -1 for a death
// by signal or a failure to run.
func exitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// Runs of etcdlock that hold a lock around a command the test controls.

// holdingRun starts `etcdlock run NAME flags... -- sh -c` with a command
// that writes "$ETCDLOCK_SLOT $ETCDLOCK_TOKEN" to dir/id once it runs and
// exits when dir/id.stop appears. The run is killed when t ends.
func holdingRun(t *testing.T, ep, dir, id, name string, flags ...string) *exec.Cmd {
	t.Helper()
	return startHoldingRun(t, ep, dir, id, name, nil, flags...)
}

// waitingRun is holdingRun for a run that must wait: it returns once the
// run says whom it waits for, which it does only while it still waits.
func waitingRun(t *testing.T, ep, dir, id, name string, flags ...string) *exec.Cmd {
	t.Helper()
	stderr := &lockedBuffer{}
	cmd := startHoldingRun(t, ep, dir, id, name, stderr, flags...)
	stderr.waitFor(t, "waiting for lock", 20*time.Second)
	return cmd
}

// startHoldingRun is holdingRun with the run's stderr on stderr (nil:
// discarded).
func startHoldingRun(t *testing.T, ep, dir, id, name string, stderr io.Writer, flags ...string) *exec.Cmd {
	t.Helper()
	out := filepath.Join(dir, id)
	script := fmt.Sprintf(`echo "${ETCDLOCK_SLOT:--} $ETCDLOCK_TOKEN" > %[1]s.tmp && mv %[1]s.tmp %[1]s; while [ ! -e %[1]s.stop ]; do sleep 0.05; done`, out)
	args := append(append([]string{"run", name}, flags...), "--shell", "--", script)
	cmd := cliCommand(t, ep, nil, args...)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.WriteFile(out+".stop", nil, 0o644)
		_ = cmd.Wait()
	})
	return cmd
}

// running reports what a holdingRun's command wrote ("" while it has not
// started): its slot ("-" for none) and token.
func running(dir, id string) string {
	b, _ := os.ReadFile(filepath.Join(dir, id))
	return strings.TrimSpace(string(b))
}

// startedRun is holdingRun once its command runs.
func startedRun(t *testing.T, ep, dir, id, name string, flags ...string) *exec.Cmd {
	t.Helper()
	cmd := holdingRun(t, ep, dir, id, name, flags...)
	etcdtest.Eventually(t, 20*time.Second, func() bool { return running(dir, id) != "" }, "the run "+id+" did not start")
	return cmd
}

// pausedRun is a run whose command, once started, waits for the test: the
// test acts while the lock is held, then lets the command exit and reads
// how the run ended.
type pausedRun struct {
	cmd    *exec.Cmd
	stderr strings.Builder
	key    string // the command's ETCDLOCK_KEY
	done   string // the file that lets the command exit
}

// startPaused starts etcdlock at endpoint with args (flags, run and its
// names) and a command that exits with status once the test calls
// finish. It returns once the command runs and ready, if not nil, holds.
func startPaused(t *testing.T, endpoint string, status int, ready func() bool, args ...string) *pausedRun {
	t.Helper()
	dir := t.TempDir()
	started := filepath.Join(dir, "key")
	p := &pausedRun{done: filepath.Join(dir, "done")}
	script := `echo "$ETCDLOCK_KEY" > "$1.tmp" && mv "$1.tmp" "$1"; while [ ! -e "$2" ]; do sleep 0.05; done; exit "$3"`
	p.cmd = cliCommand(t, endpoint, nil, append(args, "--", "sh", "-c", script, "sh", started, p.done, strconv.Itoa(status))...)
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(started)
		p.key = strings.TrimSpace(string(b))
		return err == nil && (ready == nil || ready())
	}, "the command did not start")
	return p
}

// finish lets the command exit and returns the run's exit code and
// stderr.
func (p *pausedRun) finish(t *testing.T) (code int, stderr string) {
	t.Helper()
	if err := os.WriteFile(p.done, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := p.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	return code, p.stderr.String()
}

// Processes and their output.

// pidIn reads the pid a command below the process run (an etcdlock)
// wrote to path once it appears, and returns it as this process sees it:
// a command in a PID namespace, etcdlock's default on Linux, writes the
// namespace's.
func pidIn(t *testing.T, run int, path string) int {
	t.Helper()
	var pid int
	etcdtest.Eventually(t, 20*time.Second, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, "the command never wrote its pid")
	return hostPID(t, run, pid)
}

// hostPID returns, as this process sees it, the live process below root
// that its own PID namespace calls inner.
func hostPID(t *testing.T, root, inner int) int {
	t.Helper()
	p, ok := findPID(t, root, inner)
	if !ok {
		t.Fatalf("no process %d below %d", inner, root)
	}
	return p
}

// findPID is hostPID for a process that may have exited: ok is false
// if no process below root has that pid.
func findPID(t *testing.T, root, inner int) (pid int, ok bool) {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil || innermostPID(p) != inner {
			continue
		}
		for q := p; q > 1; q = parentOf(q) {
			if q == root {
				return p, true
			}
		}
	}
	return 0, false
}

// innermostPID is pid as the PID namespace it is in calls it (the last
// field of NSpid in /proc/PID/status), or 0 if it is gone.
func innermostPID(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "NSpid:" {
			n, _ := strconv.Atoi(f[len(f)-1])
			return n
		}
	}
	return 0
}

// parentOf is pid's parent, or 0 if pid is gone.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// isZombie reports whether pid has exited but not been reaped (its parent
// is gone too, so only init will reap it).
func isZombie(pid int) bool {
	state, ok := procState(pid)
	return !ok || state == "Z"
}

// procState is pid's state in /proc/PID/stat ("R", "S", "T", "Z", ...),
// and whether pid exists.
func procState(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) == 0 {
		return "", true
	}
	return f[0], true
}

// lockedBuffer is an io.Writer the exec copier and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor returns once the buffer holds want, failing t if it does not
// within the bound.
func (l *lockedBuffer) waitFor(t *testing.T, want string, within time.Duration) {
	t.Helper()
	end := time.Now().Add(within)
	for !strings.Contains(l.String(), want) {
		if time.Now().After(end) {
			t.Fatalf("no %q within %v; output:\n%s", want, within, l.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Goroutines, from the goroutine profile.

// goroutineGroup is one record of the goroutine profile: count goroutines
// with the same labels and stack.
type goroutineGroup struct {
	count int
	text  string // the labels line and the stack
}

// goroutineGroups reads the goroutine profile.
func goroutineGroups() []goroutineGroup {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		panic(err)
	}
	var out []goroutineGroup
	for _, rec := range strings.Split(buf.String(), "\n\n") {
		head, rest, _ := strings.Cut(strings.TrimLeft(rec, "\n"), "\n")
		n, _, ok := strings.Cut(head, " @ ")
		count, err := strconv.Atoi(n)
		if !ok || err != nil {
			continue
		}
		out = append(out, goroutineGroup{count, rest})
	}
	return out
}

// goroutineDump is every goroutine's stack, grouped.
func goroutineDump() string {
	var b strings.Builder
	for _, g := range goroutineGroups() {
		fmt.Fprintf(&b, "%d × %s\n\n", g.count, g.text)
	}
	return b.String()
}

// The long modes (make chaos): their settings and the totals table they
// end with.

// longRuns reads a long mode's settings from NAME_RUNS (the test is skipped
// unless it is positive) and NAME_SEED (default: drawn from the time).
func longRuns(t *testing.T, name string) (runs int, seed uint64) {
	runs, _ = strconv.Atoi(os.Getenv(name + "_RUNS"))
	if runs <= 0 {
		t.Skip("set " + name + "_RUNS (make chaos)")
	}
	seed, _ = strconv.ParseUint(os.Getenv(name+"_SEED"), 10, 64)
	if seed == 0 {
		seed = uint64(time.Now().UnixNano() % 1_000_000)
	}
	return runs, seed
}

// totalsTable is the table a long mode (chaos, session reuse) ends with: a
// title, then one fact per row, aligned.
type totalsTable struct {
	b strings.Builder
	w *tabwriter.Writer
}

// newTotalsTable starts the table title with the rows every long mode has:
// its runs and its wall time.
func newTotalsTable(title string, runs, controlRuns int, took time.Duration) *totalsTable {
	t := &totalsTable{}
	t.w = tabwriter.NewWriter(&t.b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(t.w, "\n%s\t\n", title)
	t.row("runs (of which negative controls)", fmt.Sprintf("%d (%d)", runs, controlRuns))
	t.row("wall time", took.Round(time.Second))
	return t
}

func (t *totalsTable) row(k string, v any) { fmt.Fprintf(t.w, "%s\t%v\n", k, v) }

// counts adds a row per key of m, in key order, named prefix+key.
func (t *totalsTable) counts(prefix string, m map[string]int) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		t.row(prefix+k, m[k])
	}
}

// String returns the table, which is then complete.
func (t *totalsTable) String() string {
	t.w.Flush()
	return t.b.String()
}
