// Package kuberecord is the layout of package kubelock's records in etcd,
// shared with the etcdlock command, which must not import kubelock or any
// Kubernetes module.
//
// Under a prefix ending in '/' (DefaultPrefix "/etcdlock-kube/"), an
// election's keys are
//
//	<prefix><name>           the record, under its term's etcd lease
//	<prefix><name>\x00terms  the term count: its version is the number of terms created,
//	                         its value the latest term's etcd lease in hex (empty if written by
//	                         an earlier release)
//
// A name holds no NUL, so no record's key is a count's. The record's key's
// create revision is the term's fencing token. The format is on the wire:
// records written by earlier releases must keep their meaning.
package kuberecord

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// DefaultPrefix is the default key prefix of the records.
const DefaultPrefix = "/etcdlock-kube/"

// termsSuffix ends the key of an election's term count.
const termsSuffix = "\x00terms"

// TermsKey returns the key whose version counts the terms of the election
// whose record is at key.
func TermsKey(key string) string { return key + termsSuffix }

// IsRecordKey reports whether key, found under a prefix, is a record's
// (not a term count's).
func IsRecordKey(key string) bool { return !strings.ContainsRune(key, 0) }

// Record is a record's value: client-go's LeaderElectionRecord, as its
// JSON has it, and what etcdlock adds under "etcdlock".
type Record struct {
	HolderIdentity       string `json:"holderIdentity"`
	LeaseDurationSeconds int    `json:"leaseDurationSeconds"`
	// AcquireTime and RenewTime have whole seconds; Term has them to the
	// microsecond.
	AcquireTime       *time.Time `json:"acquireTime"`
	RenewTime         *time.Time `json:"renewTime"`
	LeaderTransitions int        `json:"leaderTransitions"`
	Term              Term       `json:"etcdlock"`
}

// Term is what etcdlock adds to client-go's record.
type Term struct {
	// Lease is the term's etcd lease, in hex as etcdctl prints it.
	Lease string `json:"lease"`
	// Renewals counts the term's Updates.
	Renewals int64 `json:"renewals"`
	// AcquireTime and RenewTime are the record's, to the microsecond.
	AcquireTime time.Time `json:"acquireTime"`
	RenewTime   time.Time `json:"renewTime"`
}

// Decode parses the value of the record at key.
func Decode(key string, value []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(value, &r); err != nil {
		return Record{}, fmt.Errorf("kubelock: %s holds no leader election record: %w", key, err)
	}
	return r, nil
}

// Acquired returns when the term started, to the microsecond when the
// record has it.
func (r Record) Acquired() time.Time {
	if !r.Term.AcquireTime.IsZero() || r.AcquireTime == nil {
		return r.Term.AcquireTime
	}
	return *r.AcquireTime
}

// Renewed returns when the holder last renewed the term, to the
// microsecond when the record has it.
func (r Record) Renewed() time.Time {
	if !r.Term.RenewTime.IsZero() || r.RenewTime == nil {
		return r.Term.RenewTime
	}
	return *r.RenewTime
}
