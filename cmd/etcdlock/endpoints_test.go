package main

import (
	"slices"
	"testing"
)

// checkEndpoints gives etcd's client what it can dial, trimmed and with a
// lower-case scheme, and refuses the rest with a reason.
func TestCheckEndpoints(t *testing.T) {
	for _, tt := range []struct {
		in, want string // want "" : refused
	}{
		{"127.0.0.1:2379", "127.0.0.1:2379"},
		{" 127.0.0.1:2379\t", "127.0.0.1:2379"},
		{"HTTPS://etcd:2379/", "https://etcd:2379/"},
		{"http://u:p@127.0.0.1:2379", "http://u:p@127.0.0.1:2379"},
		{"[::1]:2379", "[::1]:2379"},
		{"localhost:http", "localhost:http"},
		{"UNIX:/run/etcd.sock", "unix:/run/etcd.sock"},
		{"unix:/run/a b.sock", "unix:/run/a b.sock"},
		{"unixs:///run/etcd.sock", "unixs:///run/etcd.sock"},
		{"127.0.0.1", ""},
		{"127.0.0.1:2379/", ""},
		{"127.0.0.1:0", ""},
		{"127.0.0.1:65536", ""},
		{"127.0.0.1: 2379", ""},
		{"[::1%lo]:2379", ""},
		{"::::", ""},
		{"ftp://127.0.0.1:2379", ""},
		{"http://127.0.0.1", ""},
		{"unix:", ""},
		{"unix://", ""},
	} {
		got, err := checkEndpoints([]string{tt.in})
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%q: accepted as %q, want it refused", tt.in, got)
		case tt.want != "" && (err != nil || !slices.Equal(got, []string{tt.want})):
			t.Errorf("%q: %q, %v; want %q", tt.in, got, err, tt.want)
		case err != nil && exitCode(err) != 64:
			t.Errorf("%q: exit %d, want 64", tt.in, exitCode(err))
		}
	}
}
