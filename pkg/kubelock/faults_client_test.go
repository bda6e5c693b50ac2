package kubelock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// faultKV wraps a client's KV: loseNext makes the next Txn that etcd
// applies return an error (a lost reply); block, when set, makes every
// Commit wait for it to be closed before it is sent.
type faultKV struct {
	clientv3.KV
	loseNext atomic.Bool
	mu       sync.Mutex
	block    chan struct{}
	blocked  chan struct{} // receives when a Commit starts waiting
}

func (k *faultKV) Txn(ctx context.Context) clientv3.Txn {
	return &faultTxn{Txn: k.KV.Txn(ctx), k: k, ctx: ctx}
}

type faultTxn struct {
	clientv3.Txn
	k   *faultKV
	ctx context.Context
}

func (t *faultTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *faultTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *faultTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *faultTxn) Commit() (*clientv3.TxnResponse, error) {
	t.k.mu.Lock()
	b := t.k.block
	t.k.mu.Unlock()
	if b != nil {
		if t.k.blocked != nil {
			t.k.blocked <- struct{}{}
		}
		<-b
	}
	resp, err := t.Txn.Commit()
	if err == nil && t.k.loseNext.CompareAndSwap(true, false) {
		return nil, errors.New("injected: the reply was lost")
	}
	return resp, err
}
