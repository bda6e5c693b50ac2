//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// A result that cannot be written to stdout (a full device) is a failure,
// not a silent success: exit 1 with the reason. An acquire whose grant
// could not be printed gives the grant back, since its caller never got
// the token. A pipe whose reader left (`| head`) is the reader's choice:
// help exits 0 without a word, and `leader --watch` stops once nobody
// reads it.
func TestCLIOutputThatCannotBeWritten(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	for _, args := range [][]string{{"acquire", "lost-output"}, {"-w", "json", "acquire", "lost-output"}, {"list"}, {"status", "lost-output"}, {"completion", "bash"}, {"help", "exit-codes"}} {
		cmd := cliCommand(t, ep, nil, args...)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = full, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "write the result to stdout") {
			t.Errorf("%v > /dev/full: %v %q; want exit 1 saying the result could not be written", args, err, stderr.String())
		}
		if slices.Contains(args, "acquire") && !strings.Contains(stderr.String(), "the grant is released") {
			t.Errorf("%v > /dev/full: %q; want the grant released", args, stderr.String())
		}
		if r := cli(t, ep, nil, "status", "lost-output"); r.code != 0 || !strings.Contains(r.stdout, "free") {
			t.Errorf("after %v > /dev/full: status %d %q; want the name free", args, r.code, r.stdout)
		}
	}

	// leader --watch | head -1: the first line ("none") is read, then the
	// reader is gone, and the next leader's line ends the watch.
	watch := cliCommand(t, ep, nil, "leader", "--watch", "lost-output-election")
	out, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	watch.Stderr = &stderr
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(line) != "none" {
		t.Fatalf("leader --watch's first line %q (%v), want none", line, err)
	}
	out.Close() // the reader is gone
	done := make(chan error, 1)
	go func() { done <- watch.Wait() }()
	if r := cli(t, ep, nil, "run", "lost-output-election", "--", "true"); r.code != 0 {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	select {
	case err := <-done:
		if err != nil || stderr.Len() != 0 {
			t.Errorf("leader --watch after its reader left: %v %q; want exit 0 without a message", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("leader --watch still runs 30 s after its reader left and the leader changed")
	}
}

// `etcdlock COMMAND --help | head -1`: the help stops at the closed pipe
// and etcdlock exits 0 without a word, as the shell's own commands do.
func TestCLIHelpIntoAClosedPipe(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"run", "--help"}, {"--help"}, {"help", "exit-codes"}} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r.Close() // the reader is gone before the first write
		cmd := cliCommand(t, shared.Endpoints()[0], nil, args...)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = w, &stderr
		err = cmd.Run()
		w.Close()
		if err != nil || stderr.Len() != 0 {
			t.Errorf("%v | head: %v %q; want exit 0 without a message", args, err, stderr.String())
		}
	}
}
