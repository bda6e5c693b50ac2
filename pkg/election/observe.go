package election

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Leader describes an election's leader. The zero Leader means no one
// leads.
type Leader struct {
	Identity string
	Token    fencing.Token
	Key      string
	// Since is when the term began, on the leader's clock: when its
	// OnStartedLeading was about to run (Term.Started), which is later
	// than its key's creation by the time it queued, and later still when
	// it waited for an earlier term's tenure key to go. It is zero for a
	// leader that had not begun when read (the holder of the leader key
	// still waiting for an earlier term's tenure key), or that writes no
	// tenure key.
	Since time.Time
}

// leaderOf is the leader that st says holds the leader key, its Since
// read from the term's tenure key, and the revision of that read (0 if
// none was needed); with an error, that read's, Since is zero.
func leaderOf(ctx context.Context, client *clientv3.Client, prefix string, st holders.Status) (Leader, int64, error) {
	if st.Holder == nil {
		return Leader{}, 0, nil
	}
	h := st.Holder
	l := Leader{Identity: h.Owner, Token: h.Token, Key: h.Key}
	keys := keyspace.Of(prefix, st.Name)
	resp, err := client.Get(ctx, keys.Tenures(), clientv3.WithPrefix())
	if err != nil {
		return l, 0, fmt.Errorf("election: read the tenure keys of %q: %w", st.Name, err)
	}
	rev := resp.Header.Revision
	own := keys.Tenure(int64(h.LeaseID), int64(h.Token))
	i := slices.IndexFunc(resp.Kvs, func(kv *mvccpb.KeyValue) bool { return string(kv.Key) == own })
	if i < 0 {
		return l, rev, nil
	}
	// An earlier term's key still there: the term waits for it to go,
	// whatever its own key says (it says "not begun" from before the
	// earlier key can go).
	if slices.ContainsFunc(resp.Kvs, func(kv *mvccpb.KeyValue) bool {
		return kv.Lease != 0 && kv.CreateRevision < resp.Kvs[i].CreateRevision
	}) {
		return l, rev, nil
	}
	var v tenureValue
	if json.Unmarshal(resp.Kvs[i].Value, &v) == nil {
		l.Since = v.Started
	}
	return l, rev, nil
}

// GetLeader returns the current leader of the election name under prefix
// (the candidates' lock.WithPrefix, else lock.DefaultPrefix): the zero
// Leader if none. Its errors are holders.Inspect's, and those of the read
// of the term's tenure key that follows.
func GetLeader(ctx context.Context, client *clientv3.Client, prefix, name string) (Leader, error) {
	st, err := holders.Inspect(ctx, client, prefix, name)
	if err != nil {
		return Leader{}, err
	}
	l, _, err := leaderOf(ctx, client, prefix, st)
	if err != nil {
		return Leader{}, err
	}
	return l, nil
}

// Observe reports the current leader of name under prefix, then every
// change of leader (identity or term), learned by watching etcd rather than
// polling.
//
// A nil client, a prefix not ending in '/' or an invalid name is reported
// at once, before etcd is contacted: Observe returns a nil channel and the
// error GetLeader would return (matching lock.ErrInvalidOption or
// lock.ErrInvalidName). It fails for no other reason.
//
// Otherwise the channel receives the leader (the zero Leader if none) as
// of the first successful read of etcd, then each change; etcd errors are
// retried with backoff, never sent. A change is sent only once the previous
// one was received: changes made while the reader is busy are reported as
// one, the newest. A leader reported before its term began (its key
// holds the leader key a moment before its OnStartedLeading runs, and
// longer while an earlier term's tenure key stays) comes with a zero
// Since, and is reported again, with Since, once the term begins; a read
// of Since that failed is retried with the next change. The channel is closed when ctx ends, by the goroutine
// feeding it as its last act: drain the channel to wait for it.
func Observe(ctx context.Context, client *clientv3.Client, prefix, name string) (<-chan Leader, error) {
	// Follow would report a nil client too, but on the goroutine below,
	// where it could not be returned.
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", lock.ErrInvalidOption)
	}
	if err := lock.ValidateName(name); err != nil {
		return nil, err
	}
	if !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("%w: prefix %q must end in '/'", lock.ErrInvalidOption, prefix)
	}
	ch := make(chan Leader)
	go observe(ctx, client, prefix, name, ch)
	return ch, nil
}

// observe feeds ch for Observe until ctx ends, then closes it. Follow
// runs on a goroutine of its own and hands over the newest status; a
// leader whose term has not begun is followed on its tenure keys until
// it has, so that its Since is sent too.
func observe(ctx context.Context, client *clientv3.Client, prefix, name string, ch chan<- Leader) {
	defer close(ch)
	statuses := make(chan holders.Status, 1) // the newest only
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		// Follow checks client, prefix and name as Observe did, so it
		// returns only once ctx ends.
		_ = holders.Follow(ctx, client, prefix, name, func(st holders.Status) bool {
			select {
			case <-statuses: // replaced by the newer st
			default:
			}
			statuses <- st // this goroutine alone sends: never blocks
			return true
		})
	}()
	defer func() { <-followed }()

	var (
		st      holders.Status
		sent    *Leader            // the last leader ch took
		next    *Leader            // the leader to send, nil once sent
		tenures clientv3.WatchChan // while the leader's term has not begun
		stop    = func() {}        // ends the tenures watch
	)
	defer func() { stop() }()
	tenuresPrefix := keyspace.Of(prefix, name).Tenures()
	// read reads the leader st names and, while its term has not begun,
	// watches its tenure keys from the read on.
	read := func() {
		stop()
		stop, tenures = func() {}, nil
		l, rev, err := leaderOf(ctx, client, prefix, st)
		next = &l
		if sent != nil && *sent == l {
			next = nil
		}
		if l.Token != 0 && l.Since.IsZero() && err == nil {
			wctx, cancel := context.WithCancel(ctx)
			stop = cancel
			tenures = client.Watch(wctx, tenuresPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		}
	}
	for {
		var out chan<- Leader
		var l Leader
		if next != nil {
			out, l = ch, *next
		}
		select {
		case <-ctx.Done():
			return
		case st = <-statuses:
			var token fencing.Token
			if st.Holder != nil {
				token = st.Holder.Token
			}
			cur := next
			if cur == nil {
				cur = sent
			}
			if cur != nil && cur.Token == token && (token == 0 || tenures != nil || !cur.Since.IsZero()) {
				continue // the same term: its Since known, or watched for
			}
			read()
		case _, ok := <-tenures: // a tenure key changed, or the watch ended
			if !ok {
				// Ended by etcd (a compaction, a refusal): read again,
				// which watches from the new revision, after a pause
				// that keeps a refusal from looping.
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
			read()
		case out <- l:
			sent, next = &l, nil
		}
	}
}
