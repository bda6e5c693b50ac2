package integration

import (
	"strings"
	"testing"
	"time"
)

// A call to an etcd that stopped answering (frozen, as SIGSTOP freezes
// it) fails once --request-timeout has passed, with exit 69 and the reason,
// found while the request waited: the endpoint accepts connections but does
// not answer. No request is retried or followed by another: a frozen etcd
// would answer none of them, and each would add its own timeout.
func TestCLIFrozenEtcd(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	for _, args := range [][]string{
		{"status", "job"},
		{"acquire", "job"},
		{"release", "job", "--owner", "o", "--token", "5"},
		{"run", "job", "--", "true"},
		{"run", "--try", "job", "--", "true"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			f := newFreezer(t, ep, "")
			began := time.Now()
			r := cli(t, f.addr(), nil, append([]string{"--request-timeout", "1s"}, args...)...)
			took := time.Since(began)
			if r.code != 69 || !strings.Contains(r.stderr, "does not answer") {
				t.Errorf("%q: exit %d, stderr %q; want 69 saying that etcd does not answer", args, r.code, r.stderr)
			}
			if calls := f.callsOnceFrozen(); len(calls) != 1 {
				t.Errorf("%q: calls sent to the frozen etcd %q, want the one that found it frozen", args, calls)
			}
			if took >= 3*time.Second {
				t.Errorf("%q took %v with --request-timeout 1s", args, took)
			}
		})
	}
}

// A run whose try finds etcd frozen cleans up that try (bounded by
// --request-timeout) and revokes nothing: the revoke would wait another
// timeout for no answer; the lease expires within --ttl.
func TestCLIFrozenEtcdDuringTry(t *testing.T) {
	t.Parallel()
	f := newFreezer(t, shared.Endpoints()[0], "/etcdserverpb.KV/Txn")
	r := cli(t, f.addr(), nil, "--request-timeout", "1s", "run", "--try", "job", "--", "true")
	if r.code != 69 || !strings.Contains(r.stderr, "does not answer") {
		t.Errorf("exit %d, stderr %q; want 69 saying that etcd does not answer", r.code, r.stderr)
	}
	txns := 0
	for _, c := range f.callsOnceFrozen() {
		switch c {
		case "/etcdserverpb.KV/Txn":
			txns++ // the try, then its clean-up
		case "/etcdserverpb.Lease/LeaseKeepAlive": // the session's renewals, in the background
		default:
			t.Errorf("call %s sent to the frozen etcd", c)
		}
	}
	if txns > 2 {
		t.Errorf("%d transactions sent to the frozen etcd, want the try and its clean-up", txns)
	}
}
