package main

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// A cluster's layout, recorded in its data directory, comes back as it
// was; a record that is not one, or of another size, is refused with a
// message that says what to do, never one that leads in a circle.
func TestClusterLayoutRecord(t *testing.T) {
	dir := t.TempDir()
	first, err := clusterLayout(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.clients) != 3 || len(first.initial) != 3 {
		t.Fatalf("layout %+v, want 3 members and 3 client addresses", first)
	}
	again, err := clusterLayout(dir, 3)
	if err != nil || !reflect.DeepEqual(again, first) {
		t.Fatalf("restart's layout %+v (%v), want the recorded %+v", again, err, first)
	}
	if _, err := clusterLayout(dir, 5); err == nil || !strings.Contains(err.Error(), "start it with --members 3") {
		t.Errorf("5 members on a 3-member record: %v", err)
	}
	if err := notClusterData(dir); err == nil || !strings.Contains(err.Error(), "start it with --members 3") {
		t.Errorf("a single member on a 3-member record: %v", err)
	}
	// A record from before the client addresses were recorded gets them,
	// distinct from the peers', and keeps them from then on.
	old := t.TempDir()
	if err := os.WriteFile(filepath.Join(old, layoutFile), []byte("tok\nm0=http://127.0.0.1:20001,m1=http://127.0.0.1:20002\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := clusterLayout(old, 2)
	if err != nil || got.token != "tok" || len(got.clients) != 2 || slices.Contains(got.clients, "127.0.0.1:20001") || slices.Contains(got.clients, "127.0.0.1:20002") {
		t.Fatalf("an old record's layout %+v (%v), want its peers and two new client addresses", got, err)
	}
	if again, err := clusterLayout(old, 2); err != nil || !reflect.DeepEqual(again, got) {
		t.Fatalf("an old record's restart %+v (%v), want %+v", again, err, got)
	}
	for _, rec := range []string{
		"",
		"tok\n",
		"tok\nm0=http://127.0.0.1:20001\n", // one member: not --members
		"tok\nm0=http://127.0.0.1:20001,m1=http://127.0.0.1:20002,\n",                                       // trailing comma
		"tok\nm0=http://127.0.0.1:20001,m2=http://127.0.0.1:20002\n",                                        // names out of order
		"tok\nm0=http://0.0.0.0:20001,m1=http://127.0.0.1:20002\n",                                          // not loopback
		"tok\nm0=http://127.0.0.1,m1=http://127.0.0.1:20002\n",                                              // no port
		"tok\nm0=http://127.0.0.1:20001,m1=http://127.0.0.1:20002\nmore\n",                                  // a client line that is not one
		"tok\nm0=http://127.0.0.1:20001,m1=http://127.0.0.1:20002\n127.0.0.1:20003\n",                       // too few clients
		"tok\nm0=http://127.0.0.1:20001,m1=http://127.0.0.1:20002\n127.0.0.1:20003,127.0.0.1:20001\n",       // a peer's port
		"tok\nm0=http://127.0.0.1:20001,m1=http://127.0.0.1:20002\n127.0.0.1:20003,0.0.0.0:20004\n",         // not loopback
		"tok\nm0=http://127.0.0.1:20001,m1=http://127.0.0.1:20002\n127.0.0.1:20003,127.0.0.1:20004\nmore\n", // four lines
		"tok\nm0=http://127.0.0.1:20001,m1=http://127.0.0.1:20001\n",                                        // a port twice
		"tok\nm0=http://127.0.0.1:99999,m1=http://127.0.0.1:20002\n",                                        // out of range
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
				_, err = clusterLayout(bad, n)
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
	if got, err := clusterLayout(crlf, 2); err != nil || got.token != "tok" || len(got.initial) != 2 {
		t.Errorf("a record with CRLF line ends: %+v %v", got, err)
	}
}
