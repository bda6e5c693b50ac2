package keyspace

import (
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// The segments that follow an escaped name, each outside every name's
// contender range ('%' is escaped in names).
const (
	slotSegment    = "%slot"
	markerSegment  = "%held"
	timerSegment   = "%delay"
	startedSegment = "%delayed"
	tenureSegment  = "%tenure"
)

var (
	escaper   = strings.NewReplacer("%", "%25", "/", "%2F")
	unescaper = strings.NewReplacer("%25", "%", "%2F", "/")
)

// Escape is name as one key segment: '%' written as %25 and '/' as %2F.
// A name without '/' and '%' is its own segment, as etcd's
// concurrency.Mutex and etcdctl lock write it. Escaping works character by
// character, so the escaped names that start with p are the segments that
// start with Escape(p).
func Escape(name string) string { return escaper.Replace(name) }

// Unescape is the name whose escaped form is seg; ok is false if seg is
// not one (a key that etcdlock did not write): a name is non-empty and
// holds no NUL.
func Unescape(seg string) (name string, ok bool) {
	name = unescaper.Replace(seg)
	return name, name != "" && !strings.ContainsRune(name, 0) && Escape(name) == seg
}

// Name is the keys of one lock name under one prefix.
type Name struct{ base string } // prefix + escaped name

// Of returns the keys of name under prefix. Neither is checked: the
// callers check them first (a prefix ends in '/', a name is non-empty and
// holds no NUL).
func Of(prefix, name string) Name { return Name{prefix + Escape(name)} }

// Contenders is the prefix under which the name's contenders keep their
// keys; the holder is the key with the lowest create revision.
func (n Name) Contenders() string { return n.base + "/" }

// Contender is lease's key under the name: deterministic per (lease,
// name), so a retry after a lost reply finds the key its first attempt
// wrote.
func (n Name) Contender(lease int64) string { return fmt.Sprintf("%s/%x", n.base, lease) }

// OfContender returns the keys of the name whose contender key is key (as
// Contender writes it), sharing key's bytes: nothing is allocated.
func OfContender(key string) Name { return Name{key[:strings.LastIndexByte(key, '/')]} }

// Slots is the prefix of a semaphore's slot keys.
func (n Name) Slots() string { return n.base + slotSegment + "/" }

// Slot is the key of slot i of a semaphore.
func (n Name) Slot(i int) string { return n.Slots() + strconv.Itoa(i) }

// Markers is the prefix of the name's lock-delay markers.
func (n Name) Markers() string { return n.base + markerSegment + "/" }

// Marker is the lock-delay marker of the acquisition under lease whose
// contender key has create revision token.
func (n Name) Marker(lease, token int64) string {
	return fmt.Sprintf("%s%x-%x", n.Markers(), lease, token)
}

// Delay returns the keys that time a lock-delay of seconds after the
// unclean end whose newest marker has revision rev: the timer, with a
// lease of that many seconds, and the record that it was started, without
// a lease.
func (n Name) Delay(rev, seconds int64) (timer, started string) {
	id := fmt.Sprintf("%x-%d", rev, seconds)
	return n.base + timerSegment + "/" + id, n.base + startedSegment + "/" + id
}

// DelayRecords is the prefix of the name's delay records (the second key
// Delay returns).
func (n Name) DelayRecords() string { return n.base + startedSegment + "/" }

// Tenures is the prefix of the tenure keys of an election of the name
// (package election).
func (n Name) Tenures() string { return n.base + tenureSegment + "/" }

// Tenure is the tenure key of the election term whose leader key, of
// lease, has create revision token.
func (n Name) Tenure(lease, token int64) string {
	return fmt.Sprintf("%s%x-%x", n.Tenures(), lease, token)
}

// Kind says what a key under a prefix is.
type Kind int

// The kinds of key that Parse tells apart.
const (
	Other     Kind = iota // not a contender's or a slot's: a marker, a timer, a tenure key, or a key etcdlock did not write
	Contender             // a contender's key
	Slot                  // a semaphore's slot key
)

// Parse reads key, found under prefix: what it is and whose name.
func Parse(prefix, key string) (name string, kind Kind) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return "", Other
	}
	seg, _, ok := strings.Cut(rest, "/")
	if !ok {
		return "", Other
	}
	kind = Contender
	if base, isSlot := strings.CutSuffix(seg, slotSegment); isSlot {
		seg, kind = base, Slot
	}
	name, ok = Unescape(seg)
	if !ok {
		return "", Other
	}
	return name, kind
}

// SlotNumber is the slot of a slot key, -1 if key is not one.
func SlotNumber(key string) int {
	i := strings.LastIndex(key, slotSegment+"/")
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(key[i+len(slotSegment)+1:])
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// SlotsByValue maps the values of slot keys (keys under a name's
// Slots prefix) to those keys. A slot key holds the record of the
// acquisition that claimed it, the same as that acquisition's contender
// key, and records are unique within a lease (Record.Seq): the value and
// the lease pair a slot with its contender exactly, where a lease alone
// would not (a slot left by an earlier acquisition of the same session).
func SlotsByValue(kvs []*mvccpb.KeyValue) map[string]*mvccpb.KeyValue {
	m := make(map[string]*mvccpb.KeyValue, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Value)] = kv
	}
	return m
}
