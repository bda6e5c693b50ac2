package etcdfence_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/etcdfence"
	"github.com/etcdlock/etcdlock/fencing/httpfence"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// The ceiling is never below a token the lock has issued, and an HTTP
// resource guarded with it refuses a token no lock could have issued yet,
// so a huge token cannot poison the mark.
func TestCeilingRefusesUnissuedTokens(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eps, pfx := etcdtest.Endpoints(t), prefix(t)
	cli := etcdtest.Client(t, eps...)
	s, err := lock.NewSession(ctx, cli, lock.WithPrefix(pfx))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	l, err := s.Acquire(ctx, "res")
	if err != nil {
		t.Fatal(err)
	}
	ceiling, err := etcdfence.Ceiling(cli)(ctx)
	if err != nil || ceiling < l.Token() {
		t.Fatalf("ceiling %v, %v below the issued token %v", ceiling, err, l.Token())
	}
	if _, err := etcdfence.Ceiling(nil)(ctx); !errors.Is(err, etcdfence.ErrInvalidArgument) {
		t.Errorf("nil client: %v", err)
	}

	var g fencing.Guard
	fenced, err := httpfence.New(&g, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}), httpfence.WithCeiling(etcdfence.Ceiling(cli)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fenced)
	defer srv.Close()
	send := func(tok fencing.Token) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(fencing.NewContext(ctx, tok), http.MethodPut, srv.URL+"/r", nil)
		resp, err := (&http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tok := range []fencing.Token{math.MaxInt64, ceiling + 1000} {
		if code := send(tok); code != http.StatusBadRequest {
			t.Errorf("unissued token %v: %d, want 400", tok, code)
		}
	}
	if code := send(l.Token()); code != http.StatusNoContent {
		t.Errorf("the holder's token: %d", code)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := s.Acquire(ctx, "res")
	if err != nil {
		t.Fatal(err)
	}
	if code := send(next.Token()); code != http.StatusNoContent {
		t.Errorf("the next holder's token %v, above the ceiling first read: %d", next.Token(), code)
	}
	if got := g.Current("/r"); got != next.Token() {
		t.Errorf("mark %v, want %v", got, next.Token())
	}
}

// With etcd unreachable, Ceiling fails (an HTTP request is refused with
// 503) instead of waiting for a connection for as long as ctx allows.
func TestCeilingFailsWhenEtcdIsUnreachable(t *testing.T) {
	t.Parallel()
	p, url := etcdtest.Proxy(t, etcdtest.Endpoints(t)[0])
	cli := etcdtest.Client(t, url)
	if _, err := etcdfence.Ceiling(cli)(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.PauseTx()
	p.PauseRx()
	defer func() { p.UnpauseTx(); p.UnpauseRx() }()
	done := make(chan error, 1)
	go func() {
		_, err := etcdfence.Ceiling(cli)(context.Background()) // no deadline of its own
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Ceiling succeeded with etcd unreachable")
		}
	case <-time.After(4 * etcdfence.CeilingTimeout):
		t.Fatal("Ceiling never returned with etcd unreachable")
	}
}
