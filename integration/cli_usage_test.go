package integration

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Usage mistakes that cobra would answer with help and exit 0, or with
// exit 1, and endpoints that name no etcd, exit 64 at once with a message
// saying what is wrong.
func TestCLIUsageErrorsExit64(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  []string
		args []string
		msg  string
	}{
		{"unknown command", nil, []string{"nosuchcmd"}, `unknown command "nosuchcmd"`},
		{"unknown command suggests", nil, []string{"stauts", "a"}, "did you mean status"},
		{"unknown shell", nil, []string{"completion", "nosh"}, `unknown shell "nosh"`},
		{"unknown help topic", nil, []string{"help", "nosuch"}, `unknown help topic "nosuch"`},
		{"empty endpoints", nil, []string{"--endpoints", "", "status", "a"}, "--endpoints"},
		{"empty endpoints env", []string{"ETCDLOCK_ENDPOINTS="}, []string{"status", "a"}, "ETCDLOCK_ENDPOINTS"},
		{"empty endpoint in list", nil, []string{"--endpoints", ",", "--dial-timeout", "30s", "status", "a"}, "empty endpoint"},
		{"endpoint without a port", nil, []string{"--endpoints", "127.0.0.1", "--dial-timeout", "30s", "--request-timeout", "30s", "status", "a"}, "has no port"},
		{"URL without a port", nil, []string{"--endpoints", "http://127.0.0.1", "--dial-timeout", "30s", "--request-timeout", "30s", "status", "a"}, "has no port"},
		{"URL without a host", nil, []string{"--endpoints", "http:///x", "--dial-timeout", "30s", "--request-timeout", "30s", "status", "a"}, "has no port"},
		{"malformed endpoint", nil, []string{"--endpoints", "::::", "--dial-timeout", "30s", "--request-timeout", "30s", "status", "a"}, "is not host:port"},
		{"malformed URL", nil, []string{"--endpoints", "http://[::1", "--dial-timeout", "30s", "--request-timeout", "30s", "status", "a"}, "is not a URL"},
		{"unknown scheme", nil, []string{"--endpoints", "foo://127.0.0.1:2379", "--dial-timeout", "30s", "--request-timeout", "30s", "status", "a"}, "scheme \"foo\""},
		{"port out of range", nil, []string{"--endpoints", "127.0.0.1:99999", "--dial-timeout", "30s", "--request-timeout", "30s", "status", "a"}, "out of range"},
		{"port zero", nil, []string{"--endpoints", "127.0.0.1:0", "--dial-timeout", "30s", "--request-timeout", "30s", "status", "a"}, "out of range"},
		{"socket without a path", nil, []string{"--endpoints", "unix://", "--dial-timeout", "30s", "--request-timeout", "30s", "status", "a"}, "no socket path"},
		{"one bad endpoint among good ones", nil, []string{"--endpoints", "127.0.0.1:2379,127.0.0.1", "--dial-timeout", "30s", "--request-timeout", "30s", "status", "a"}, "has no port"},
		{"a tab inside an endpoint", nil, []string{"--endpoints", "127.0.0.1:23\t79", "--dial-timeout", "30s", "--request-timeout", "30s", "status", "a"}, "space or a control character"},
		{"an IPv6 zone", nil, []string{"--endpoints", "[::1%lo]:2379", "--dial-timeout", "30s", "--request-timeout", "30s", "status", "a"}, "IPv6 zone"},
		{"a port that is no number", nil, []string{"--endpoints", "127.0.0.1:2379/", "--dial-timeout", "30s", "--request-timeout", "30s", "status", "a"}, "neither a number nor a service name"},
		{"bad endpoint from the environment", []string{"ETCDCTL_ENDPOINTS=::::"}, []string{"--dial-timeout", "30s", "--request-timeout", "30s", "status", "a"}, "is not host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.CommandContext(testCtx(t, time.Minute), cliPath, tt.args...)
			cmd.Env = append(cleanEnv(), tt.env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 64 || !strings.Contains(stderr.String(), tt.msg) {
				t.Errorf("etcdlock %q: %v, stderr %q; want exit 64 saying %q", tt.args, err, stderr.String(), tt.msg)
			}
			if stdout.Len() != 0 {
				t.Errorf("etcdlock %q printed on stdout: %q", tt.args, stdout.String())
			}
		})
	}
	// What is no mistake still works: help, help of a command, completion.
	for _, args := range [][]string{{}, {"help"}, {"help", "run"}, {"completion"}, {"completion", "bash"}} {
		cmd := exec.CommandContext(testCtx(t, time.Minute), cliPath, args...)
		cmd.Env = cleanEnv()
		if out, err := cmd.Output(); err != nil || len(out) == 0 {
			t.Errorf("etcdlock %q: %v, %d bytes of output; want help and exit 0", args, err, len(out))
		}
	}
}
