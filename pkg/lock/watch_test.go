package lock_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// A holder whose watch stream breaks must still learn of a delete that
// happened while it was disconnected, even after etcd compacted the
// revisions its watch would resume from: it re-reads the key. A key that
// survived keeps being watched.
func TestHolderNoticesDeleteMissedWhileDisconnected(t *testing.T) {
	ctx, direct := testCtx(t), client(t)
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
	cli := etcdtest.Client(t, url)
	s := newSession(t, cli, lock.WithTTL(30*time.Second))
	deleted, err := s.Acquire(ctx, "deleted")
	if err != nil {
		t.Fatal(err)
	}
	kept, err := s.Acquire(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}

	p.Close() // the session's connection, and its watch stream, drop
	if _, err := direct.Delete(ctx, deleted.Key()); err != nil {
		t.Fatal(err)
	}
	put, err := direct.Put(ctx, prefix(t)+"other", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Compact(ctx, put.Header.Revision); err != nil {
		t.Fatal(err)
	}
	etcdtest.RestartProxy(t, p)

	select {
	case <-deleted.Lost():
	case <-time.After(20 * time.Second):
		t.Fatal("the lock whose key was deleted while disconnected was not lost")
	}
	if !errors.Is(deleted.Err(), lock.ErrKeyDeleted) {
		t.Errorf("lost with %v, want ErrKeyDeleted", deleted.Err())
	}
	if kept.State() != lock.StateActive {
		t.Fatalf("the lock whose key survived is %v (%v), want active", kept.State(), kept.Err())
	}
	if _, err := direct.Delete(ctx, kept.Key()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-kept.Lost():
	case <-time.After(20 * time.Second):
		t.Fatal("the resumed watch missed a delete")
	}
	if !errors.Is(kept.Err(), lock.ErrKeyDeleted) {
		t.Errorf("lost with %v, want ErrKeyDeleted", kept.Err())
	}
}

// Held locks share the session's watch stream: holding more locks adds no
// goroutines, and every one of them still notices its key's deletion.
func TestHeldLocksShareOneWatchStream(t *testing.T) {
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	first, err := s.Acquire(ctx, "l0") // opens the stream
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the stream's goroutines start
	before := runtime.NumGoroutine()
	const n = 200
	held := []*lock.Lock{first}
	for i := 1; i < n; i++ {
		l, err := s.Acquire(ctx, fmt.Sprintf("l%d", i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	if grown := runtime.NumGoroutine() - before; grown > 10 {
		t.Errorf("%d more goroutines after acquiring %d more locks", grown, n-1)
	}
	if _, err := cli.Delete(ctx, prefix(t), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	for _, l := range held {
		select {
		case <-l.Lost():
		case <-time.After(20 * time.Second):
			t.Fatalf("%s not lost after its key was deleted", l.Name())
		}
	}
}

// A lock released within the own-key watch delay on a fresh session must
// not leave the session's watch stream asleep: the next lock's key watch is
// still created, so a plain delete of its key is noticed.
func TestKeyWatchAfterQuickReleaseOnFreshSession(t *testing.T) {
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	start := time.Now()
	quick, err := s.Acquire(ctx, "quick")
	if err != nil {
		t.Fatal(err)
	}
	if err := quick.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d >= 100*time.Millisecond {
		t.Logf("acquire and release took %v, longer than the own-key watch delay: this run proves less", d)
	}
	held, err := s.Acquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, held.Key()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Lost():
	case <-time.After(2 * time.Second):
		t.Fatalf("the lock whose key was deleted is still %v after 2s", held.State())
	}
	if !errors.Is(held.Err(), lock.ErrKeyDeleted) {
		t.Errorf("lost with %v, want ErrKeyDeleted", held.Err())
	}
}
