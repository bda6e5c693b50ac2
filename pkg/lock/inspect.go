package lock

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
)

// Contender is one key under a lock name: the holder or a waiter.
type Contender struct {
	Key    string
	Record // the key's value: owner, host, pid, acquired
	// Token is the key's create revision; for a semaphore's holder (see
	// WithLimit), its slot key's: the holder's fencing token either way.
	Token   fencing.Token
	LeaseID clientv3.LeaseID
	// Slot is a semaphore holder's slot, and SlotKey its key; -1 and ""
	// for every other contender.
	Slot    int
	SlotKey string
	// Foreign is set when the key has no etcdlock record (Record is then
	// zero): another etcd lock client, such as etcdctl lock or
	// concurrency.Mutex, wrote it. It takes part in the queue all the same.
	Foreign bool
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

// Inspect reads the holder and the waiters of name in one request. Its
// option is WithPrefix; a nil or invalid one fails with ErrInvalidOption.
func Inspect(ctx context.Context, client *clientv3.Client, name string, opts ...ReadOption) (Status, error) {
	if err := validateClient(client); err != nil {
		return Status{}, err
	}
	if err := ValidateName(name); err != nil {
		return Status{}, err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return Status{}, err
	}
	return readStatus(ctx, client, cfg.prefix, name)
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
		return Status{}, fmt.Errorf("lock: inspect %q: %w", name, err)
	}
	st := Status{Name: name, Revision: resp.Header.Revision}
	slots := slotsByValue(resp.Responses[1].GetResponseRange().Kvs)
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		st.add(contenderOf(kv, slots))
	}
	if err := resolveSets(ctx, client, prefix, []*Status{&st}); err != nil {
		return Status{}, fmt.Errorf("lock: inspect %q: %w", name, err)
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
			if n != st.Name && ValidateName(n) == nil {
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

// slotsByValue maps the values of slot keys (keys under a name's
// Slots prefix) to those keys. A slot key holds the record of the
// acquisition that claimed it, the same as that acquisition's contender
// key, and records are unique within a lease (Record.Seq): the value and
// the lease pair a slot with its contender exactly, where a lease alone
// would not (a slot left by an earlier acquisition of the same session).
func slotsByValue(kvs []*mvccpb.KeyValue) map[string]*mvccpb.KeyValue {
	m := make(map[string]*mvccpb.KeyValue, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Value)] = kv
	}
	return m
}

// List returns the status of every lock name under the prefix whose name
// starts with namePrefix ("" for all), sorted by name, from one read. Its
// option is WithPrefix; a nil or invalid one fails with ErrInvalidOption.
func List(ctx context.Context, client *clientv3.Client, namePrefix string, opts ...ReadOption) ([]Status, error) {
	if err := validateClient(client); err != nil {
		return nil, err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	// Escaping works character by character, so the escaped names that
	// start with namePrefix are the keys that start with its escaped form.
	resp, err := client.Get(ctx, cfg.prefix+keyspace.Escape(namePrefix), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("lock: list: %w", err)
	}
	byName := map[string]*Status{}
	slots := map[string][]*mvccpb.KeyValue{} // per name
	var contenders []*mvccpb.KeyValue
	var names []string
	for _, kv := range resp.Kvs {
		switch name, kind := keyspace.Parse(cfg.prefix, string(kv.Key)); kind {
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
		st.add(contenderOf(kv, slotsByValue(slots[names[i]])))
	}
	all := make([]*Status, 0, len(byName))
	for _, st := range byName {
		all = append(all, st)
	}
	if err := resolveSets(ctx, client, cfg.prefix, all); err != nil {
		return nil, fmt.Errorf("lock: list: %w", err)
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
// by value (see slotsByValue).
func contenderOf(kv *mvccpb.KeyValue, slots map[string]*mvccpb.KeyValue) Contender {
	r, ok := keyspace.Decode(kv.Value)
	c := Contender{Key: string(kv.Key), Record: r, Token: fencing.Token(kv.CreateRevision), LeaseID: clientv3.LeaseID(kv.Lease), Foreign: !ok, Slot: -1}
	if sk, ok := slots[string(kv.Value)]; ok && r.Limit > 1 && sk.Lease == kv.Lease {
		c.Slot, c.SlotKey, c.Token = keyspace.SlotNumber(string(sk.Key)), string(sk.Key), fencing.Token(sk.CreateRevision)
	}
	return c
}

func isLeaseNotFound(err error) bool { return errors.Is(err, rpctypes.ErrLeaseNotFound) }
