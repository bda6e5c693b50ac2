package kuberecord

import (
	"testing"
	"time"
)

// A record as package kubelock writes it decodes with its times to the
// microsecond; a count's key is never taken for a record's.
func TestDecode(t *testing.T) {
	value := `{"holderIdentity":"a","leaseDurationSeconds":15,"acquireTime":"2026-01-02T03:04:05Z","renewTime":"2026-01-02T03:04:07Z",` +
		`"leaderTransitions":2,"etcdlock":{"lease":"694d","renewals":3,"acquireTime":"2026-01-02T03:04:05.678901Z","renewTime":"2026-01-02T03:04:07.000001Z"}}`
	r, err := Decode("/etcdlock-kube/ctl", []byte(value))
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC)
	if r.HolderIdentity != "a" || r.LeaderTransitions != 2 || r.Term.Lease != "694d" || r.Term.Renewals != 3 || !r.Acquired().Equal(want) ||
		!r.Renewed().Equal(time.Date(2026, 1, 2, 3, 4, 7, 1000, time.UTC)) {
		t.Errorf("Decode = %+v, acquired %v", r, r.Acquired())
	}
	if _, err := Decode("k", []byte("not json")); err == nil {
		t.Error("Decode of a value that is no record succeeded")
	}
	if !IsRecordKey("/etcdlock-kube/ctl") || IsRecordKey(TermsKey("/etcdlock-kube/ctl")) {
		t.Error("IsRecordKey does not tell a record's key from a count's")
	}
}
