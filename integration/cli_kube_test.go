package integration

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// kube-leaders shows a Kubernetes controller's election as package
// kubelock stores it (its layout: pkg/kuberecord, checked against the
// lock by kubelock's TestRecordLayoutIsKuberecords): the holder, the
// record's create revision as the token, the term's times and
// transitions; a term count's key is no election.
func TestCLIKubeLeaders(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	cl := etcdtest.Client(t, ep)
	ctx := testCtx(t, time.Minute)
	kp := prefixOf(t) + "kube/"
	g, err := cl.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	record := `{"holderIdentity":"pod-a","leaseDurationSeconds":15,"acquireTime":"2026-01-02T03:04:05Z","renewTime":"2026-01-02T03:04:07Z",` +
		`"leaderTransitions":3,"etcdlock":{"lease":"` + strconv.FormatInt(int64(g.ID), 16) + `","renewals":2,` +
		`"acquireTime":"2026-01-02T03:04:05.678901Z","renewTime":"2026-01-02T03:04:07.000001Z"}}`
	put, err := cl.Put(ctx, kp+"ctl", record, clientv3.WithLease(g.ID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Put(ctx, kp+"ctl\x00terms", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Put(ctx, kp+"other", strings.Replace(record, "pod-a", "pod-b", 1)); err != nil {
		t.Fatal(err)
	}

	r := cli(t, ep, nil, "-w", "json", "kube-leaders", "--kube-prefix", kp, "ct")
	var views []struct {
		Name        string `json:"name"`
		Holder      string `json:"holder"`
		Token       string `json:"token"`
		Lease       string `json:"lease"`
		Acquired    string `json:"acquired"`
		Transitions int    `json:"transitions"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &views); err != nil || r.code != 0 {
		t.Fatalf("kube-leaders -w json: exit %d %v: %s%s", r.code, err, r.stdout, r.stderr)
	}
	if len(views) != 1 || views[0].Name != "ctl" || views[0].Holder != "pod-a" || views[0].Token != strconv.FormatInt(put.Header.Revision, 10) ||
		views[0].Lease != strconv.FormatInt(int64(g.ID), 16) || views[0].Transitions != 3 || views[0].Acquired == "unknown" {
		t.Errorf("kube-leaders ct = %+v, want ctl held by pod-a with token %d, lease %x and 3 transitions", views, put.Header.Revision, g.ID)
	}
	text := cli(t, ep, nil, "kube-leaders", "--kube-prefix", kp).stdout
	if !strings.Contains(text, "TRANSITIONS") || !strings.Contains(text, "pod-a") || !strings.Contains(text, "pod-b") || strings.Contains(text, "terms") {
		t.Errorf("kube-leaders lists:\n%s\nwant ctl and other, and no term count", text)
	}
	// The plain output has the etcd lease too, in the LEASE column.
	lines := strings.Split(strings.TrimSpace(text), "\n")
	leaseCol := slices.Index(strings.Fields(lines[0]), "LEASE")
	var ctlLease string
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > leaseCol && leaseCol >= 0 && f[0] == "ctl" {
			ctlLease = f[leaseCol]
		}
	}
	if ctlLease != strconv.FormatInt(int64(g.ID), 16) {
		t.Errorf("kube-leaders lists:\n%s\nwant ctl's lease %x in a LEASE column", text, g.ID)
	}
	if r := cli(t, ep, nil, "kube-leaders", "--kube-prefix", "no-slash"); r.code != 64 {
		t.Errorf("--kube-prefix without '/': exit %d, want 64", r.code)
	}
}
