package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// mainPaths names, for every command of the CLI, the test that runs its
// main path through the built binary: a subtest of TestCLICommandMainPaths
// ("" here) or a test elsewhere.
var mainPaths = map[string]string{
	"run":          "",
	"elect":        "",
	"acquire":      "TestCLIScriptCommands",
	"renew":        "TestCLIScriptCommands",
	"release":      "TestCLIScriptCommands",
	"status":       "TestCLIScriptCommands",
	"list":         "TestCLIScriptCommands",
	"leader":       "TestCLIScriptCommands",
	"kube-leaders": "TestCLIKubeLeaders",
	"break":        "",
	"dev":          "TestCLIDevServer",
	"version":      "",
	"completion":   "",
	"help":         "",
}

// Every command the binary offers has a test of its main path: the list
// is the binary's own (cobra's completion of the first argument).
func TestCLIEveryCommandHasAMainPathTest(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(cliPath, "__complete", "").Output()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(line, "\t")
		if name != "" && !strings.HasPrefix(name, ":") {
			got = append(got, name)
		}
	}
	if len(got) < 10 {
		t.Fatalf("the binary lists %d commands: %q", len(got), out)
	}
	for _, name := range got {
		if _, ok := mainPaths[name]; !ok {
			t.Errorf("command %q has no end-to-end test of its main path", name)
		}
	}
	for name := range mainPaths {
		if !slices.Contains(got, name) {
			t.Errorf("mainPaths lists %q, which the binary does not offer", name)
		}
	}
}

func TestCLICommandMainPaths(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	t.Run("run", func(t *testing.T) {
		r := cli(t, ep, nil, "run", "job", "--shell", "--", `echo "token=$ETCDLOCK_TOKEN"; exit 4`)
		if r.code != 4 || !strings.HasPrefix(r.stdout, "token=") || r.stdout == "token=\n" {
			t.Errorf("exit %d stdout %q stderr %q, want the command's 4 and its token", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("elect", func(t *testing.T) {
		dir := t.TempDir()
		// The first leader holds the term until told to stop; a second
		// candidate runs its command only after the first term ended.
		first := cliCommand(t, ep, nil, "elect", "ctl", "--owner", "one", "--shell", "--",
			`echo "$ETCDLOCK_TOKEN" > "$D/one"; while [ ! -e "$D/stop" ]; do sleep 0.05; done; exit 5`)
		first.Env = append(first.Env, "D="+dir)
		if err := first.Start(); err != nil {
			t.Fatal(err)
		}
		etcdtest.Eventually(t, 20*time.Second, func() bool { _, err := os.Stat(filepath.Join(dir, "one")); return err == nil },
			"the first candidate never led")
		if r := cli(t, ep, nil, "leader", "ctl"); !strings.HasPrefix(r.stdout, "one ") {
			t.Errorf("leader while the first leads: %q %q", r.stdout, r.stderr)
		}
		second := cliCommand(t, ep, []string{"D=" + dir}, "elect", "ctl", "--owner", "two", "--shell", "--",
			`[ -e "$D/stop" ] && echo "$ETCDLOCK_TOKEN" > "$D/two"`)
		if err := second.Start(); err != nil {
			t.Fatal(err)
		}
		waitQueued(t, context.Background(), etcdtest.Client(t, ep), "ctl", 2)
		if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := first.Wait(); exitCodeOf(err) != 5 {
			t.Errorf("first candidate: %v, want the command's 5", err)
		}
		if err := second.Wait(); err != nil {
			t.Errorf("second candidate: %v", err)
		}
		one, two := tokenIn(t, filepath.Join(dir, "one")), tokenIn(t, filepath.Join(dir, "two"))
		if one <= 0 || two <= one {
			t.Errorf("terms' tokens %d then %d: want the second term's larger", one, two)
		}
	})
	t.Run("break", func(t *testing.T) {
		dir := t.TempDir()
		hold := holdingRun(t, ep, dir, "a", "job")
		etcdtest.Eventually(t, 20*time.Second, func() bool { return running(dir, "a") != "" }, "holder never ran")
		tok := strings.Fields(running(dir, "a"))[1]
		r := cli(t, ep, nil, "break", "job", "--token", tok)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "broke job: holder ") {
			t.Errorf("break: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		if err := hold.Wait(); exitCodeOf(err) != 79 {
			t.Errorf("broken holder: %v, want 79", err)
		}
		if r := cli(t, ep, nil, "status", "job"); !strings.Contains(r.stdout, "free") {
			t.Errorf("status after break: %q", r.stdout)
		}
	})
	t.Run("version", func(t *testing.T) {
		r := cli(t, ep, nil, "version")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "etcdlock ") || !strings.Contains(r.stdout, "etcd client") {
			t.Errorf("version: exit %d stdout %q", r.code, r.stdout)
		}
	})
	t.Run("completion", func(t *testing.T) {
		r := cli(t, ep, nil, "completion", "bash")
		if r.code != 0 || !strings.Contains(r.stdout, "__start_etcdlock") {
			t.Errorf("completion bash: exit %d, %d bytes", r.code, len(r.stdout))
		}
	})
	t.Run("help", func(t *testing.T) {
		for _, args := range [][]string{{"help", "exit-codes"}, {"exit-codes", "--help"}} {
			r := cli(t, ep, nil, args...)
			if r.code != 0 || !strings.Contains(r.stdout, "Exit codes:") || !strings.Contains(r.stdout, "75") || !strings.Contains(r.stdout, "79") {
				t.Errorf("%s: exit %d stdout %q", strings.Join(args, " "), r.code, r.stdout)
			}
		}
	})
}

// tokenIn reads the token a command wrote to path.
func tokenIn(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}
