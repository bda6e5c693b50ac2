package election

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// The tenure keys a new term waits for: every other term's, on a lease;
// and of those, the ones still there in a later read.
func TestAwaitedTenureKeys(t *testing.T) {
	kv := func(key string, create, lease int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte(key), CreateRevision: create, Lease: lease}
	}
	keys := func(kvs []*mvccpb.KeyValue) []string {
		out := []string{}
		for _, kv := range kvs {
			out = append(out, string(kv.Key))
		}
		return out
	}
	const own = "/p/n%tenure/2-20"
	for _, tc := range []struct {
		name          string
		read          []*mvccpb.KeyValue
		wait, ignored []string
	}{
		{"none", nil, []string{}, []string{}},
		{"only its own (a retried put that landed)", []*mvccpb.KeyValue{kv(own, 21, 9)}, []string{}, []string{}},
		{"an earlier term's", []*mvccpb.KeyValue{kv("/p/n%tenure/1-10", 11, 7), kv(own, 21, 9)}, []string{"/p/n%tenure/1-10"}, []string{}},
		{"two earlier terms'", []*mvccpb.KeyValue{kv("/p/n%tenure/1-10", 11, 7), kv("/p/n%tenure/3-15", 16, 8)},
			[]string{"/p/n%tenure/1-10", "/p/n%tenure/3-15"}, []string{}},
		{"a key without a lease: no term's", []*mvccpb.KeyValue{kv("/p/n%tenure/x", 5, 0)}, []string{}, []string{"/p/n%tenure/x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait, ignored := awaited(tc.read, own)
			if diff := cmp.Diff(tc.wait, keys(wait)); diff != "" {
				t.Errorf("waited for (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.ignored, keys(ignored)); diff != "" {
				t.Errorf("ignored (-want +got):\n%s", diff)
			}
		})
	}
	a, b := kv("/p/n%tenure/1-10", 11, 7), kv("/p/n%tenure/3-15", 16, 8)
	for _, tc := range []struct {
		name string
		read []*mvccpb.KeyValue
		want []string
	}{
		{"both there", []*mvccpb.KeyValue{a, b}, []string{string(a.Key), string(b.Key)}},
		{"one gone", []*mvccpb.KeyValue{b}, []string{string(b.Key)}},
		{"both gone", nil, []string{}},
		{"re-created: another key", []*mvccpb.KeyValue{kv(string(a.Key), 40, 7)}, []string{}},
	} {
		t.Run("remaining/"+tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, keys(remaining([]*mvccpb.KeyValue{a, b}, tc.read))); diff != "" {
				t.Errorf("remaining (-want +got):\n%s", diff)
			}
		})
	}
}
