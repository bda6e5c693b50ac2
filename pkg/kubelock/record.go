package kubelock

import (
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// stored is the value of a record's key: client-go's record, plus what
// etcd adds (the term's token is the key's create revision). Get returns
// these bytes as the raw record; Renewals makes
// them differ after every write, even one that stores an equal record in
// the same second (metav1.Time has whole seconds), because client-go's
// followers treat unchanged bytes as a leader that stopped renewing.
type stored struct {
	rl.LeaderElectionRecord
	Term termRecord `json:"etcdlock"`
}

type termRecord struct {
	// Lease is the term's etcd lease, in hex as etcdctl prints it.
	Lease string `json:"lease"`
	// Renewals counts the term's Updates.
	Renewals int64 `json:"renewals"`
	// AcquireTime and RenewTime are the record's, to the microsecond as a
	// Lease keeps them (MicroTime): the record's own JSON has whole
	// seconds.
	AcquireTime metav1.MicroTime `json:"acquireTime"`
	RenewTime   metav1.MicroTime `json:"renewTime"`
}

func encode(ler rl.LeaderElectionRecord, lease clientv3.LeaseID, renewals int64) ([]byte, error) {
	return json.Marshal(stored{ler, termRecord{
		Lease:       leaseHex(lease),
		Renewals:    renewals,
		AcquireTime: metav1.NewMicroTime(ler.AcquireTime.Time),
		RenewTime:   metav1.NewMicroTime(ler.RenewTime.Time),
	}})
}

func decode(key string, value []byte) (*rl.LeaderElectionRecord, error) {
	var s stored
	if err := json.Unmarshal(value, &s); err != nil {
		return nil, fmt.Errorf("kubelock: %s holds no leader election record: %w", key, err)
	}
	rec := s.LeaderElectionRecord
	if !s.Term.AcquireTime.IsZero() {
		rec.AcquireTime = metav1.NewTime(s.Term.AcquireTime.Time)
	}
	if !s.Term.RenewTime.IsZero() {
		rec.RenewTime = metav1.NewTime(s.Term.RenewTime.Time)
	}
	return &rec, nil
}
