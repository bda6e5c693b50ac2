package integration

import (
	"os/exec"
	"strings"
	"testing"
)

// `etcdlock dev --help` lists dev's own flags, not etcdlock's global ones,
// which do not apply to it; a command line dev cannot serve is a usage
// error (64), as the exit-code table says, not a configuration error.
func TestCLIDevFlags(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(cliPath, "dev", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("dev --help: %v\n%s", err, out)
	}
	for _, f := range []string{"--data-dir", "--listen", "--members", "--log-level"} {
		if !strings.Contains(string(out), "\n      "+f+" ") {
			t.Errorf("dev --help does not list %s:\n%s", f, out)
		}
	}
	for _, f := range []string{"--endpoints", "--request-timeout", "Global Flags"} {
		if strings.Contains(string(out), f) {
			t.Errorf("dev --help lists %s, which does not apply to dev:\n%s", f, out)
		}
	}
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--listen", "127.0.0.1:0", "--members", "3"}, "--listen"},
		{[]string{"--members", "0"}, "--members"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--bogus"}, "unknown flag"},
		{[]string{"extra"}, "extra"},
		// Not a loopback IP with a port: localhost too, which may resolve
		// to 127.0.0.1 for etcd and to ::1 for a client.
		{[]string{"--listen", "0.0.0.0:0"}, "not a loopback IP"},
		{[]string{"--listen", "10.0.0.1:2379"}, "not a loopback IP"},
		{[]string{"--listen", "localhost:0"}, "not a loopback IP"},
		{[]string{"--listen", "127.0.0.1"}, "not host:port"},
		{[]string{"--listen", "127.0.0.1:99999"}, "0 to 65535"},
		{[]string{"--listen", ""}, "not host:port"},
	} {
		cmd := exec.Command(cliPath, append([]string{"dev"}, tt.args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); exitCodeOf(err) != 64 || !strings.Contains(stderr.String(), tt.msg) {
			t.Errorf("dev %q: %v, stderr %q; want exit 64 naming %q", tt.args, err, stderr.String(), tt.msg)
		}
	}
}
