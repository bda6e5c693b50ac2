package lock

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
)

// The kinds' pure decisions, without etcd: which kind options choose,
// whom a reader waits for, which queues a contender refuses, and the
// order in which a semaphore's contender tries the free slots.

func TestNewKind(t *testing.T) {
	for _, tt := range []struct {
		ac    acquireConfig
		names []string
		want  string
	}{
		{acquireConfig{}, nil, "lock.plain"},
		{acquireConfig{limit: 1}, nil, "lock.plain"},
		{acquireConfig{limit: 2}, nil, "*lock.slotHold"},
		{acquireConfig{shared: true}, nil, "lock.reader"},
		{acquireConfig{lockDelay: time.Second}, nil, "*lock.delayHold"},
		{acquireConfig{}, []string{"b"}, "*lock.setHold"},
	} {
		if got := fmt.Sprintf("%T", newKind(tt.ac, tt.names, tt.names)); got != tt.want {
			t.Errorf("newKind(%+v, %q) = %s, want %s", tt.ac, tt.names, got, tt.want)
		}
	}
}

func TestOneKind(t *testing.T) {
	for _, tt := range []struct {
		ac acquireConfig
		ok bool
	}{
		{acquireConfig{}, true},
		{acquireConfig{limit: 3}, true},
		{acquireConfig{shared: true, limit: 1}, true},
		{acquireConfig{shared: true, limit: 2}, false},
		{acquireConfig{lockDelay: time.Second, limit: 2}, false},
		{acquireConfig{lockDelay: time.Second, shared: true}, false},
	} {
		if err := tt.ac.oneKind(); (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%+v.oneKind() = %v, want ok %v", tt.ac, err, tt.ok)
		}
	}
}

// record is the value an etcdlock client of owner o writes with r's kind.
func record(r keyspace.Record) []byte {
	r.Owner = "o"
	return []byte(r.Encode())
}

func TestReaderTurn(t *testing.T) {
	reader := &mvccpb.KeyValue{Key: []byte("r"), Value: record(keyspace.Record{Shared: true})}
	writer := &mvccpb.KeyValue{Key: []byte("w"), Value: record(keyspace.Record{})}
	foreign := &mvccpb.KeyValue{Key: []byte("f")} // etcdctl lock, concurrency.Mutex
	for _, tt := range []struct {
		name  string
		older []*mvccpb.KeyValue
		more  bool
		wait  bool
		pred  string
	}{
		{"free", nil, false, false, ""},
		{"readers only", []*mvccpb.KeyValue{reader, reader}, false, false, ""},
		{"readers, more beyond the page", []*mvccpb.KeyValue{reader}, true, true, ""},
		{"a writer behind readers", []*mvccpb.KeyValue{reader, writer, reader}, true, true, "w"},
		{"another client's key", []*mvccpb.KeyValue{foreign}, false, true, "f"},
	} {
		if wait, pred := readerTurn(tt.older, tt.more); wait != tt.wait || pred != tt.pred {
			t.Errorf("%s: readerTurn = %v, %q, want %v, %q", tt.name, wait, pred, tt.wait, tt.pred)
		}
	}
}

func TestOneKindPerQueue(t *testing.T) {
	l := &Lock{lockName: lockName{name: "n"}}
	kv := func(r keyspace.Record) *mvccpb.KeyValue { return &mvccpb.KeyValue{Key: []byte("k"), Value: record(r)} }
	foreign := &mvccpb.KeyValue{Key: []byte("k")}
	for _, tt := range []struct {
		name   string
		pred   *mvccpb.KeyValue
		behind bool // behindSemaphore refuses it
	}{
		{"lock", kv(keyspace.Record{}), false},
		{"reader", kv(keyspace.Record{Shared: true}), false},
		{"semaphore", kv(keyspace.Record{Limit: 2}), true},
		{"another client", foreign, false},
	} {
		if err := behindSemaphore(l, tt.pred); (err != nil) != tt.behind || err != nil && !errors.Is(err, ErrLimitMismatch) {
			t.Errorf("behindSemaphore(%s) = %v, want refused %v", tt.name, err, tt.behind)
		}
	}
	for _, tt := range []struct {
		name  string
		older []*mvccpb.KeyValue
		ok    bool // checkLimits with limit 2 accepts it
	}{
		{"none", nil, true},
		{"same limit", []*mvccpb.KeyValue{kv(keyspace.Record{Limit: 2}), kv(keyspace.Record{Limit: 2})}, true},
		{"another limit", []*mvccpb.KeyValue{kv(keyspace.Record{Limit: 2}), kv(keyspace.Record{Limit: 3})}, false},
		{"a lock", []*mvccpb.KeyValue{kv(keyspace.Record{})}, false},
		{"a reader", []*mvccpb.KeyValue{kv(keyspace.Record{Shared: true})}, false},
		{"another client", []*mvccpb.KeyValue{foreign}, false},
	} {
		if err := checkLimits(l, 2, tt.older); (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrLimitMismatch) {
			t.Errorf("checkLimits(%s) = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestSlotOrder(t *testing.T) {
	name := keyspace.Of("/p/", "n")
	slot := func(i int, lease int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte(name.Slot(i)), Lease: lease}
	}
	contender := func(lease int64) *mvccpb.KeyValue { return &mvccpb.KeyValue{Key: []byte(name.Contender(lease))} }
	for _, tt := range []struct {
		name         string
		limit        int
		older, slots []*mvccpb.KeyValue
		max          int
		want         []int
	}{
		{"free", 3, nil, nil, 8, []int{0, 1, 2}},
		{"at most max", 3, nil, nil, 1, []int{0}},
		{"a holder's slot is taken", 3, []*mvccpb.KeyValue{contender(7)}, []*mvccpb.KeyValue{slot(0, 7)}, 8, []int{1, 2}},
		// An older contender without a slot is about to claim the first
		// free one: start after it, and wrap around.
		{"after an older claimer", 3, []*mvccpb.KeyValue{contender(7)}, nil, 8, []int{1, 2, 0}},
		{"after a claimer, beside a holder", 4, []*mvccpb.KeyValue{contender(7), contender(8)}, []*mvccpb.KeyValue{slot(1, 7)}, 8, []int{2, 3, 0}},
		{"every slot taken", 2, nil, []*mvccpb.KeyValue{slot(0, 7), slot(1, 8)}, 8, nil},
		// More claimers than free slots: a stale listing, or holders
		// whose contender keys are gone.
		{"more claimers than free slots", 2, []*mvccpb.KeyValue{contender(7), contender(8), contender(9)}, nil, 8, []int{1, 0}},
	} {
		if got := slotOrder(name, tt.limit, tt.older, tt.slots, tt.max); !slices.Equal(got, tt.want) {
			t.Errorf("%s: slotOrder = %v, want %v", tt.name, got, tt.want)
		}
	}
}
