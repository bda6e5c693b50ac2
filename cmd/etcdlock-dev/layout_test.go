package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A cluster's layout, recorded in its data directory, comes back as it
// was; a record that is not one, or of another size, is refused with a
// message that says what to do, never one that leads in a circle.
func TestClusterLayoutRecord(t *testing.T) {
	dir := t.TempDir()
	initial, token, err := clusterLayout(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	again, token2, err := clusterLayout(dir, 3)
	if err != nil || token2 != token || !slices.Equal(again, initial) {
		t.Fatalf("restart's layout %v %q (%v), want the recorded %v %q", again, token2, err, initial, token)
	}
	if _, _, err := clusterLayout(dir, 5); err == nil || !strings.Contains(err.Error(), "start it with --members 3") {
		t.Errorf("5 members on a 3-member record: %v", err)
	}
	if err := notClusterData(dir); err == nil || !strings.Contains(err.Error(), "start it with --members 3") {
		t.Errorf("a single member on a 3-member record: %v", err)
	}
	for _, rec := range []string{
		"",
		"tok\n",
		"tok\nm0=http://127.0.0.1:20001\n", // one member: not --members
		"tok\nm0=http://127.0.0.1:20001,m1=http://127.0.0.1:20002,\n",      // trailing comma
		"tok\nm0=http://127.0.0.1:20001,m2=http://127.0.0.1:20002\n",       // names out of order
		"tok\nm0=http://0.0.0.0:20001,m1=http://127.0.0.1:20002\n",         // not loopback
		"tok\nm0=http://127.0.0.1,m1=http://127.0.0.1:20002\n",             // no port
		"tok\nm0=http://127.0.0.1:20001,m1=http://127.0.0.1:20002\nmore\n", // three lines
		"tok\nm0=http://127.0.0.1:20001,m1=http://127.0.0.1:20001\n",       // a port twice
		"tok\nm0=http://127.0.0.1:99999,m1=http://127.0.0.1:20002\n",       // out of range
	} {
		bad := t.TempDir()
		if err := os.WriteFile(filepath.Join(bad, layoutFile), []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 2, 3} {
			var err error
			if n == 1 {
				err = notClusterData(bad)
			} else {
				_, _, err = clusterLayout(bad, n)
			}
			if err == nil || !strings.Contains(err.Error(), "is not a cluster record") {
				t.Errorf("record %q, %d members: %v; want it refused as not a cluster record", rec, n, err)
			}
		}
	}
	crlf := t.TempDir()
	if err := os.WriteFile(filepath.Join(crlf, layoutFile), []byte("tok\r\nm0=http://127.0.0.1:20001,m1=http://127.0.0.1:20002\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, tok, err := clusterLayout(crlf, 2); err != nil || tok != "tok" || len(got) != 2 {
		t.Errorf("a record with CRLF line ends: %v %q %v", got, tok, err)
	}
}
