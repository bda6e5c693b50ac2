package watchmux

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcdlock/etcdlock/pkg/clock"
)

// ForClient returns a Mux whose streams are watch streams of client's
// active connection and whose re-reads are linearizable transactions of
// client, on the real clock (its delays pace requests to etcd), logging
// to log.
func ForClient(client *clientv3.Client, log *zap.Logger) *Mux {
	open := func(ctx context.Context) (pb.Watch_WatchClient, error) {
		return pb.NewWatchClient(client.ActiveConnection()).Watch(ctx, grpc.WaitForReady(true))
	}
	m := New(open, readRevisions(client), clock.Real(), log)
	m.endpoints = func() int { return len(client.Endpoints()) }
	return m
}

// readRevisions reads keys' revisions in one transaction.
func readRevisions(kv clientv3.KV) ReadFunc {
	return func(ctx context.Context, keys []string) (int64, []Revs, error) {
		ops := make([]clientv3.Op, len(keys))
		for i, k := range keys {
			ops[i] = clientv3.OpGet(k, clientv3.WithKeysOnly())
		}
		resp, err := kv.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return 0, nil, err
		}
		revs := make([]Revs, len(resp.Responses))
		for i, r := range resp.Responses {
			if kvs := r.GetResponseRange().Kvs; len(kvs) > 0 {
				revs[i] = Revs{kvs[0].CreateRevision, kvs[0].ModRevision}
			}
		}
		return resp.Header.Revision, revs, nil
	}
}
