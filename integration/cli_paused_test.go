package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

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
