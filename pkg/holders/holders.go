package holders

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// ForeignHolder describes a Contender that is Foreign, in the words of
// lock.LockedError's message.
const ForeignHolder = keyspace.ForeignHolder

// Contender is one key under a lock name: a holder or a waiter.
type Contender struct {
	Key string
	// Token is the key's create revision; for a semaphore's holder, its
	// slot key's: the holder's fencing token either way.
	Token   fencing.Token
	LeaseID clientv3.LeaseID
	// Slot is a semaphore holder's slot, and SlotKey its key; -1 and ""
	// for every other contender.
	Slot    int
	SlotKey string
	// Foreign is set when the key has no etcdlock record (the fields below
	// are then zero): another etcd lock client, such as etcdctl lock or
	// concurrency.Mutex, wrote it (ForeignHolder describes it). It takes
	// part in the queue all the same.
	Foreign bool

	// What the contender wrote in its key.
	Owner          string
	Host           string
	PID            int
	Acquired       time.Time // on the writer's clock
	Limit          int       // a semaphore's limit (lock.WithLimit), else 0
	Shared         bool      // a reader (lock.WithShared)
	Names          []string  // an AcquireAll's names, in the order given
	LockDelay      time.Duration
	BreakRequested time.Time // when Break asked it to release, else zero

	record keyspace.Record // the key's value as read, written back by Break
}

// Status is a snapshot of one lock name, read at one etcd revision.
type Status struct {
	Name string
	// Holder is nil when no one holds the name (it may still have waiters:
	// an AcquireAll set at the head of its queue that waits for another of
	// its names holds none of them); else Holders[0].
	Holder *Contender
	// Holders lists every current holder, oldest first: one for a mutex,
	// possibly several for the readers of a read-write lock or the
	// holders of a semaphore.
	Holders  []Contender
	Waiters  []Contender // in the order they will be served
	Revision int64       // etcd revision of the snapshot
}

// validate checks the arguments every entry point takes.
func validate(client *clientv3.Client, prefix string) error {
	if client == nil {
		return fmt.Errorf("%w: nil client", lock.ErrInvalidOption)
	}
	if !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("%w: prefix %q must end in '/'", lock.ErrInvalidOption, prefix)
	}
	return nil
}

// Inspect reads the holders and the waiters of name under prefix (such as
// lock.DefaultPrefix) in one request.
func Inspect(ctx context.Context, client *clientv3.Client, prefix, name string) (Status, error) {
	if err := validate(client, prefix); err != nil {
		return Status{}, err
	}
	if err := lock.ValidateName(name); err != nil {
		return Status{}, err
	}
	return readStatus(ctx, client, prefix, name)
}

// readStatus is Inspect for arguments already checked; Break and Follow
// use it too.
func readStatus(ctx context.Context, client *clientv3.Client, prefix, name string) (Status, error) {
	resp, err := client.Txn(ctx).Then(
		clientv3.OpGet(keyspace.Of(prefix, name).Contenders(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		// Not keys-only: etcd's keys-only range leaves out the lease,
		// which ties a slot key to its contender.
		clientv3.OpGet(keyspace.Of(prefix, name).Slots(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return Status{}, fmt.Errorf("holders: inspect %q: %w", name, err)
	}
	st := Status{Name: name, Revision: resp.Header.Revision}
	slots := keyspace.SlotsByValue(resp.Responses[1].GetResponseRange().Kvs)
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		st.add(contenderOf(kv, slots))
	}
	if err := resolveSets(ctx, client, prefix, []*Status{&st}); err != nil {
		return Status{}, fmt.Errorf("holders: inspect %q: %w", name, err)
	}
	return st, nil
}

// resolveSets checks, for every status whose oldest contender is an
// AcquireAll set, that the set is also the oldest contender of each of its
// other names, in one more read; a set that is not is still waiting, and
// holds none of its names (its key merely heads this one's queue): it is
// moved to the waiters.
func resolveSets(ctx context.Context, client *clientv3.Client, prefix string, sts []*Status) error {
	type check struct {
		st   *Status
		name string
	}
	var checks []check
	var ops []clientv3.Op
	for _, st := range sts {
		if st.Holder == nil || len(st.Holder.Names) < 2 {
			continue
		}
		for _, n := range st.Holder.Names {
			if n != st.Name && lock.ValidateName(n) == nil {
				checks = append(checks, check{st, n})
				ops = append(ops, clientv3.OpGet(keyspace.Of(prefix, n).Contenders(), clientv3.WithFirstCreate()...))
			}
		}
	}
	waiting := map[*Status]bool{}
	err := txnInChunks(ctx, client, ops, func(resps []*etcdserverpb.ResponseOp) {
		for _, r := range resps {
			c := checks[0]
			checks = checks[1:]
			kvs := r.GetResponseRange().Kvs
			if len(kvs) == 0 || fencing.Token(kvs[0].CreateRevision) != c.st.Holder.Token || clientv3.LeaseID(kvs[0].Lease) != c.st.Holder.LeaseID {
				waiting[c.st] = true
			}
		}
	})
	if err != nil {
		return err
	}
	for st := range waiting {
		st.Waiters = append(st.Holders, st.Waiters...)
		st.Holders, st.Holder = nil, nil
	}
	return nil
}

// List returns the status of every lock name under prefix whose name
// starts with namePrefix ("" for all), sorted by name, from one read.
func List(ctx context.Context, client *clientv3.Client, prefix, namePrefix string) ([]Status, error) {
	if err := validate(client, prefix); err != nil {
		return nil, err
	}
	// Escaping works character by character, so the escaped names that
	// start with namePrefix are the keys that start with its escaped form.
	resp, err := client.Get(ctx, prefix+keyspace.Escape(namePrefix), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("holders: list: %w", err)
	}
	byName := map[string]*Status{}
	slots := map[string][]*mvccpb.KeyValue{} // per name
	var contenders []*mvccpb.KeyValue
	var names []string
	for _, kv := range resp.Kvs {
		switch name, kind := keyspace.Parse(prefix, string(kv.Key)); kind {
		case keyspace.Slot:
			slots[name] = append(slots[name], kv)
		case keyspace.Contender:
			contenders, names = append(contenders, kv), append(names, name)
		}
	}
	for i, kv := range contenders {
		st, ok := byName[names[i]]
		if !ok {
			st = &Status{Name: names[i], Revision: resp.Header.Revision}
			byName[names[i]] = st
		}
		st.add(contenderOf(kv, keyspace.SlotsByValue(slots[names[i]])))
	}
	all := make([]*Status, 0, len(byName))
	for _, st := range byName {
		all = append(all, st)
	}
	if err := resolveSets(ctx, client, prefix, all); err != nil {
		return nil, fmt.Errorf("holders: list: %w", err)
	}
	out := make([]Status, 0, len(byName))
	for _, st := range all {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// add appends c, the next contender in create-revision order, to the
// holders or the waiters.
// Readers (WithShared) at the head of the queue hold the name together;
// a semaphore's holders are the contenders that own a slot.
func (st *Status) add(c Contender) {
	holds := len(st.Holders) == 0 || len(st.Waiters) == 0 && c.Shared && st.Holders[0].Shared
	if c.Limit > 1 {
		holds = c.SlotKey != ""
	}
	if holds {
		st.Holders = append(st.Holders, c)
		st.Holder = &st.Holders[0]
		return
	}
	st.Waiters = append(st.Waiters, c)
}

// contenderOf is the contender of kv; slots are the slot keys of its name
// by value (see keyspace.SlotsByValue).
func contenderOf(kv *mvccpb.KeyValue, slots map[string]*mvccpb.KeyValue) Contender {
	r, ok := keyspace.Decode(kv.Value)
	c := Contender{Key: string(kv.Key), Token: fencing.Token(kv.CreateRevision), LeaseID: clientv3.LeaseID(kv.Lease), Foreign: !ok, Slot: -1,
		Owner: r.Owner, Host: r.Host, PID: r.PID, Acquired: r.Acquired, Limit: r.Limit, Shared: r.Shared, Names: r.Names,
		LockDelay: r.LockDelay, BreakRequested: r.BreakRequested, record: r}
	if sk, ok := slots[string(kv.Value)]; ok && r.Limit > 1 && sk.Lease == kv.Lease {
		c.Slot, c.SlotKey, c.Token = keyspace.SlotNumber(string(sk.Key)), string(sk.Key), fencing.Token(sk.CreateRevision)
	}
	return c
}

func isLeaseNotFound(err error) bool { return errors.Is(err, rpctypes.ErrLeaseNotFound) }

// txnInChunks commits ops in transactions of at most maxTxnOps (etcd's
// default bound is 128) and hands each one's responses to each.
func txnInChunks(ctx context.Context, c *clientv3.Client, ops []clientv3.Op, each func([]*etcdserverpb.ResponseOp)) error {
	for chunk := range slices.Chunk(ops, maxTxnOps) {
		resp, err := c.Txn(ctx).Then(chunk...).Commit()
		if err != nil {
			return err
		}
		each(resp.Responses)
	}
	return nil
}

// maxTxnOps is the most operations holders puts in one transaction.
const maxTxnOps = 64
