package keyspace

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The keys are on the wire: these are the keys earlier releases wrote,
// which must keep their meaning.
func TestKeysKeepTheirWireLayout(t *testing.T) {
	n := Of("/etcdlock/", "jobs/nightly%1")
	got := []string{n.Contenders(), n.Contender(0x694d7a1b2c3d4e5f), n.Slots(), n.Slot(3), n.Markers(), n.Marker(0x2a, 0x10), n.Tenures(), n.Tenure(0x2a, 0x10)}
	timer, started := n.Delay(0x1f, 5)
	got = append(got, timer, started)
	want := []string{
		"/etcdlock/jobs%2Fnightly%251/",
		"/etcdlock/jobs%2Fnightly%251/694d7a1b2c3d4e5f",
		"/etcdlock/jobs%2Fnightly%251%slot/",
		"/etcdlock/jobs%2Fnightly%251%slot/3",
		"/etcdlock/jobs%2Fnightly%251%held/",
		"/etcdlock/jobs%2Fnightly%251%held/2a-10",
		"/etcdlock/jobs%2Fnightly%251%tenure/",
		"/etcdlock/jobs%2Fnightly%251%tenure/2a-10",
		"/etcdlock/jobs%2Fnightly%251%delay/1f-5",
		"/etcdlock/jobs%2Fnightly%251%delayed/1f-5",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	if got := Of("/p/", "plain").Contender(0x1); got != "/p/plain/1" {
		t.Errorf("a plain name's contender key is %q, want etcd's concurrency.Mutex layout /p/plain/1", got)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		key  string
		name string
		kind Kind
	}{
		{"/e/jobs/694d", "jobs", Contender},
		{"/e/jobs%2Fnightly/694d", "jobs/nightly", Contender},
		{"/e/a%25b%slot/2", "a%b", Slot},
		{"/e/jobs%held/2a-10", "", Other},
		{"/e/jobs%delay/1f-5", "", Other},
		{"/e/jobs%delayed/1f-5", "", Other},
		{"/e/jobs%tenure/2a-10", "", Other},
		{"/e/%slot/2", "", Other},    // no name before the slot segment
		{"/e/a%2fb/1", "", Other},    // not how etcdlock escapes
		{"/e/a%00b/1", "", Other},    // not a valid escape
		{"/e/jobs", "", Other},       // no segment end
		{"/other/jobs/1", "", Other}, // not under the prefix
	} {
		name, kind := Parse("/e/", tc.key)
		if name != tc.name || kind != tc.kind {
			t.Errorf("Parse(%q) = %q, %v; want %q, %v", tc.key, name, kind, tc.name, tc.kind)
		}
	}
	for _, name := range []string{"a", "a/b", "%", "%2F", "/", "a%slot"} {
		if got, ok := Unescape(Escape(name)); !ok || got != name {
			t.Errorf("Unescape(Escape(%q)) = %q, %v", name, got, ok)
		}
		key := Of("/e/", name).Contender(1)
		if got, kind := Parse("/e/", key); got != name || kind != Contender {
			t.Errorf("Parse(%q) = %q, %v; want %q, a contender", key, got, kind, name)
		}
	}
	if _, ok := Unescape(""); ok {
		t.Error("the empty segment is a name")
	}
}

func TestSlotNumber(t *testing.T) {
	for key, want := range map[string]int{
		"/e/a%slot/0": 0, "/e/a%slot/12": 12, "/e/a%slot/-1": -1, "/e/a%slot/x": -1, "/e/a/1": -1,
	} {
		if got := SlotNumber(key); got != want {
			t.Errorf("SlotNumber(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestRecord(t *testing.T) {
	r := Record{Owner: "o", Host: "h", PID: 7, Acquired: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Seq: 3, Limit: 2, LockDelay: time.Second}
	const wire = `{"owner":"o","host":"h","pid":7,"acquired":"2026-01-02T03:04:05Z","seq":3,"limit":2,"lockDelay":1000000000}`
	if got := r.Encode(); got != wire {
		t.Errorf("Encode = %s, want %s", got, wire)
	}
	got, ok := Decode([]byte(wire))
	if !ok {
		t.Fatal("Decode refused its own encoding")
	}
	if diff := cmp.Diff(r, got); diff != "" {
		t.Errorf("Decode (-want +got):\n%s", diff)
	}
	for _, v := range []string{"", "{}", `{"owner":""}`, "not json"} {
		if _, ok := Decode([]byte(v)); ok {
			t.Errorf("Decode(%q) is a record", v)
		}
	}
	if Owner([]byte(wire)) != "o" || Owner(nil) != "" {
		t.Error("Owner")
	}
}

func TestOfContender(t *testing.T) {
	for _, name := range []string{"jobs", "jobs/nightly", "50%", "a/b%2Fc", "/"} {
		want := Of("/p/", name)
		if got := OfContender(want.Contender(0x1f)); got != want {
			t.Errorf("OfContender(%q's contender key) = %q, want %q", name, got.Contenders(), want.Contenders())
		}
	}
}
