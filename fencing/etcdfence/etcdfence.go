// Package etcdfence fences writes to etcd keys with an etcdlock token.
//
// A write is a transaction that commits only while the writer's lock key
// still exists with the writer's token as its create revision:
//
//	Txn If CreateRevision(ownerKey) == token Then <ops> Else Get(holder)
//
// The check and the write are one etcd transaction, so a stale owner's write
// can never commit: once its key is gone (released, expired, broken), no
// later transaction with its token succeeds, and a newer owner's key always
// has a different create revision.
//
// No mark is kept: a token is admitted by the transaction's comparison and
// its ops are applied in the same transaction, all or nothing. A caller
// that fails after Commit returned has nothing to undo in the fence. A
// token that is not the create revision of a live key is never admitted,
// so a forged huge token cannot poison anything.
//
// Ceiling reads the cluster's current revision, which no issued token
// exceeds; httpfence.WithCeiling uses it to refuse forged tokens.
package etcdfence

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdlock/etcdlock/fencing"
)

// ErrInvalidArgument is returned, wrapped, by Commit for a nil client or an
// empty owner key, before anything is sent to etcd.
var ErrInvalidArgument = errors.New("etcdfence: invalid argument")

// ErrOutcomeUnknown is wrapped, with etcd's error, by Commit's error when
// etcd did not answer whether it applied the transaction: a broken
// connection (the first request after a network partition heals often
// gets one), a timeout, an etcd election. Retry Commit (or read): a token
// superseded meanwhile is then refused with a *fencing.StaleTokenError.
var ErrOutcomeUnknown = errors.New("etcdfence: no answer, the ops may or may not have been applied; retry Commit")

// Commit applies ops in one transaction if ownerKey (the writer's
// lock.Lock.Key) still exists with create revision token. If it does not,
// nothing is applied and Commit returns a *fencing.StaleTokenError whose
// Current is the token of the name's present holder (0 if none). Any other
// error comes from etcd: it wraps ErrOutcomeUnknown unless etcd refused
// the request (gRPC codes InvalidArgument, PermissionDenied, ...). It never
// retries: ops may not be safe to apply twice. ErrInvalidArgument and
// fencing.ErrInvalidToken come before any request.
func Commit(ctx context.Context, cli *clientv3.Client, ownerKey string, token fencing.Token, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidArgument)
	}
	if ownerKey == "" {
		return nil, fmt.Errorf("%w: empty owner key", ErrInvalidArgument)
	}
	if !token.IsValid() {
		return nil, fmt.Errorf("etcdfence: %w: %d", fencing.ErrInvalidToken, token)
	}
	namePrefix := path.Dir(ownerKey) + "/"
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(ownerKey), "=", int64(token))).
		Then(ops...).
		Else(clientv3.OpGet(namePrefix, clientv3.WithFirstCreate()...)).
		Commit()
	if err != nil {
		if refused(err) {
			return nil, fmt.Errorf("etcdfence: %w", err)
		}
		return nil, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	if !resp.Succeeded {
		stale := &fencing.StaleTokenError{Resource: ownerKey, Presented: token}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			stale.Current = fencing.Token(kvs[0].CreateRevision)
		}
		return nil, stale
	}
	return resp, nil
}

// refused reports whether err, from a transaction, says that etcd refused
// it — it answered, and applied nothing — rather than that no answer came
// (codes Unavailable, DeadlineExceeded, Canceled, ResourceExhausted,
// Unknown, a context's error).
func refused(err error) bool {
	code := codes.Unknown
	var etcdErr rpctypes.EtcdError
	if st, ok := status.FromError(err); ok {
		code = st.Code()
	} else if errors.As(err, &etcdErr) {
		code = etcdErr.Code()
	}
	switch code {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.FailedPrecondition,
		codes.OutOfRange, codes.NotFound, codes.AlreadyExists, codes.Unimplemented:
		return true
	}
	return false
}

// CeilingTimeout bounds each read of Ceiling.
const CeilingTimeout = 5 * time.Second

// Ceiling returns a fencing.Ceiling that reports cli's cluster's current
// revision, read linearizably: every token an etcdlock lock on that
// cluster has issued is at most that revision. Each read is bounded by
// CeilingTimeout (clientv3 would otherwise wait for a connection for as
// long as ctx allows: with etcd unreachable, an HTTP request would hang
// instead of being refused). A nil cli makes the returned function fail
// with ErrInvalidArgument.
func Ceiling(cli *clientv3.Client) fencing.Ceiling {
	return func(ctx context.Context) (fencing.Token, error) {
		if cli == nil {
			return 0, fmt.Errorf("%w: nil client", ErrInvalidArgument)
		}
		ctx, cancel := context.WithTimeout(ctx, CeilingTimeout)
		defer cancel()
		// Any read carries the revision in its header; a count of one key
		// is the cheapest read.
		resp, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly())
		if err != nil {
			return 0, fmt.Errorf("etcdfence: ceiling: %w", err)
		}
		return fencing.Token(resp.Header.Revision), nil
	}
}
