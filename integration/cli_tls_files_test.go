package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A TLS file that cannot serve fails at once with exit 78 and names its
// flag, whatever the request timeout: a --cacert without a PEM certificate
// made an empty CA pool, and the call waited for its deadline, then blamed
// the server.
func TestCLIUnusableTLSFiles(t *testing.T) {
	t.Parallel()
	ep, dir := shared.Endpoints()[0], t.TempDir()
	ca := newCA(t, dir)
	cert, key := ca.issue(t, dir, "client", false)
	text := filepath.Join(dir, "text")
	if err := os.WriteFile(text, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		flags []string
		msg   string
	}{
		{"cacert not PEM", []string{"--cacert", text}, "not a PEM certificate"},
		{"cacert a key", []string{"--cacert", key}, "not a PEM certificate"},
		{"cacert unreadable", []string{"--cacert", dir}, "--cacert"},
		{"cert not PEM", []string{"--cert", text, "--key", key}, "--cert"},
		{"key not PEM", []string{"--cert", cert, "--key", text}, "--key"},
		{"cert unreadable", []string{"--cert", dir, "--key", key}, "--cert"},
		{"key unreadable", []string{"--cert", cert, "--key", dir}, "--key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--request-timeout", "1m", "--dial-timeout", "1m"}, tt.flags...)
			r := cli(t, ep, nil, append(args, "status", "job")...)
			if r.code != 78 || !strings.Contains(r.stderr, tt.msg) || strings.Contains(r.stderr, "deadline") {
				t.Errorf("exit %d, stderr %q; want 78 at once, naming %q", r.code, r.stderr, tt.msg)
			}
		})
	}
}
