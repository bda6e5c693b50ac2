// Package etcdfence fences writes to etcd keys with an etcdlock token.
//
// A write is a transaction that commits only while the writer's lock key
// still exists with the writer's token as its create revision:
//
//	Txn If CreateRevision(ownerKey) == token Then <ops> Else Get(ownerKey), Get(oldest in its directory)
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
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
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
// Current is the token of the name's present holder (0 if none): for a
// pkg/lock key (<prefix><name>/<lease, hex>, attached to that lease) the
// create revision of the name's oldest such key; for any other key — a
// kubelock record, a plain key — the create revision of ownerKey as it
// now exists. Any other error comes from etcd: it wraps ErrOutcomeUnknown
// unless etcd refused the request (gRPC codes InvalidArgument,
// PermissionDenied, ...). It never retries: ops may not be safe to apply
// twice. ErrInvalidArgument and fencing.ErrInvalidToken come before any
// request.
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
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(ownerKey), "=", int64(token))).
		Then(ops...).
		Else(clientv3.OpGet(ownerKey), oldestUnder(ownerKey)).
		Commit()
	if err != nil {
		if refused(err) {
			return nil, fmt.Errorf("etcdfence: %w", err)
		}
		return nil, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	if !resp.Succeeded {
		return nil, &fencing.StaleTokenError{Resource: ownerKey, Presented: token,
			Current: current(ownerKey, resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs)}
	}
	return resp, nil
}

// current is the token of ownerKey's present holder, from ownerKey's own
// key-values (at most one) and the oldest key-values under its directory.
// A contender key of pkg/lock is <prefix><escaped name>/<lease, hex>
// under that lease, and the name's holder is its oldest contender: a
// present ownerKey that is one (a waiter of the same session, say) does
// not hold the name. Any other present ownerKey is its own holder. An
// absent ownerKey shaped as a contender has the oldest contender of its
// name as holder; any other has none: the oldest key under a kubelock
// record's directory, say, is another election's record or a term count.
func current(ownerKey string, own, oldest []*mvccpb.KeyValue) fencing.Token {
	if len(own) > 0 && !isContender(own[0]) {
		return fencing.Token(own[0].CreateRevision)
	}
	dir, seg := split(ownerKey)
	if dir == "" || !isLeaseHex(seg) || len(oldest) == 0 || !isContender(oldest[0]) {
		return 0
	}
	if d, _ := split(string(oldest[0].Key)); d != dir {
		return 0
	}
	return fencing.Token(oldest[0].CreateRevision)
}

// isContender reports whether kv is in pkg/lock's contender layout: its
// last segment is its own lease's ID in hex.
func isContender(kv *mvccpb.KeyValue) bool {
	_, seg := split(string(kv.Key))
	return kv.Lease > 0 && seg == strconv.FormatInt(kv.Lease, 16)
}

// split cuts key after its last '/': dir ends in '/', or is empty when
// key has none.
func split(key string) (dir, seg string) {
	i := strings.LastIndexByte(key, '/')
	return key[:i+1], key[i+1:]
}

// oldestUnder reads the oldest key in ownerKey's directory (ownerKey
// itself when it has none: the whole keyspace is not sorted for it).
func oldestUnder(ownerKey string) clientv3.Op {
	dir, _ := split(ownerKey)
	if dir == "" {
		return clientv3.OpGet(ownerKey)
	}
	return clientv3.OpGet(dir, clientv3.WithFirstCreate()...)
}

// isLeaseHex reports whether seg could be a lease ID as pkg/lock writes
// it in a contender key: lowercase hex, no leading zero.
func isLeaseHex(seg string) bool {
	id, err := strconv.ParseInt(seg, 16, 64)
	return err == nil && id > 0 && strconv.FormatInt(id, 16) == seg
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
