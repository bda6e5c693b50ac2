package httpfence_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/httpfence"
)

// journal is a resource whose handler applies its write first and may then
// fail, as a handler whose database write succeeded and whose next step did
// not. It records the tokens of the writes it applied, in order.
type journal struct {
	mu      sync.Mutex
	applied []fencing.Token
}

func (j *journal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, _ := fencing.FromContext(r.Context())
	j.mu.Lock()
	j.applied = append(j.applied, tok)
	j.mu.Unlock()
	switch r.URL.Query().Get("then") {
	case "fail":
		http.Error(w, "failed after the write", http.StatusInternalServerError)
	case "hints-then-fail":
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		http.Error(w, "failed after the write", http.StatusInternalServerError)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (j *journal) tokens() []fencing.Token {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.applied)
}

func newJournalServer(t *testing.T, h http.Handler, opts ...httpfence.Option) (*httptest.Server, *http.Client) {
	t.Helper()
	var g fencing.Guard
	fenced := httpfence.Middleware(&g, nil, h)
	if len(opts) > 0 {
		var err error
		if fenced, err = httpfence.New(&g, h, opts...); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(fenced)
	t.Cleanup(srv.Close)
	return srv, &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport}}
}

// A token is remembered once admitted, whatever status its handler answers
// with: a handler may fail after its write was applied, and an older token
// must not write after it.
func TestMiddlewareRemembersAdmittedToken(t *testing.T) {
	for _, then := range []string{"fail", "hints-then-fail"} {
		t.Run(then, func(t *testing.T) {
			j := &journal{}
			srv, c := newJournalServer(t, j)
			if code, _ := put(t, c, srv.URL+"/r", 5); code != http.StatusNoContent {
				t.Fatalf("token 5: %d", code)
			}
			if code, _ := put(t, c, srv.URL+"/r?then="+then, 7); code != http.StatusInternalServerError {
				t.Fatalf("token 7, failing after its write: %d", code)
			}
			code, body := put(t, c, srv.URL+"/r", 6)
			if code != http.StatusConflict || body["current"] != "7" {
				t.Errorf("token 6 after admitted 7: %d %v", code, body)
			}
			if got, want := j.tokens(), []fencing.Token{5, 7}; !slices.Equal(got, want) {
				t.Errorf("writes applied in token order %v, want %v", got, want)
			}
		})
	}
}

// The default resource is the cleaned URL path: every spelling of one path
// shares one mark.
func TestMiddlewareDefaultResourceIsCleanPath(t *testing.T) {
	j := &journal{}
	srv, c := newJournalServer(t, j)
	if code, _ := put(t, c, srv.URL+"/c", 9); code != http.StatusNoContent {
		t.Fatalf("token 9 on /c: %d", code)
	}
	for _, p := range []string{"/c/", "//c", "/x/../c", "/./c", "/%63"} {
		req, _ := http.NewRequestWithContext(fencing.NewContext(context.Background(), 2), http.MethodPut, srv.URL, nil)
		req.URL.Opaque = "//" + req.URL.Host + p // sent as written, not cleaned by the client
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict {
			t.Errorf("token 2 on %q after token 9 on /c: %d, want 409", p, resp.StatusCode)
		}
	}
	if got, want := j.tokens(), []fencing.Token{9}; !slices.Equal(got, want) {
		t.Errorf("writes applied %v, want %v", got, want)
	}
}

// A handler may read its resource's current token through the guard
// without freezing the resource.
func TestMiddlewareHandlerReadsCurrent(t *testing.T) {
	var g fencing.Guard
	srv := httptest.NewServer(httpfence.Middleware(&g, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cur := g.Current(httpfence.PathResource(r)); cur.String() != r.Header.Get(fencing.Header) {
			http.Error(w, "current "+cur.String(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})))
	t.Cleanup(srv.Close)
	c := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport}}
	for _, tok := range []fencing.Token{3, 3, 4} {
		if code, body := put(t, c, srv.URL+"/r/", tok); code != http.StatusNoContent {
			t.Fatalf("token %v: %d %v", tok, code, body)
		}
	}
}

// A token above the ceiling is refused before admission, so it cannot
// poison the mark; the ceiling is asked only for a token above every value
// it has returned, and a failing ceiling refuses the request.
func TestMiddlewareCeiling(t *testing.T) {
	var (
		mu    sync.Mutex
		rev   fencing.Token = 100
		calls int
		fail  error
	)
	ceiling := func(context.Context) (fencing.Token, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return rev, fail
	}
	j := &journal{}
	srv, c := newJournalServer(t, j, httpfence.WithCeiling(ceiling))
	code, body := put(t, c, srv.URL+"/r", math.MaxInt64)
	if code != http.StatusBadRequest || !strings.Contains(body["error"], fencing.ErrNotIssued.Error()) {
		t.Fatalf("token above the ceiling: %d %v", code, body)
	}
	for _, tok := range []fencing.Token{40, 100, 99} {
		want := http.StatusNoContent
		if tok == 99 {
			want = http.StatusConflict
		}
		if code, body := put(t, c, srv.URL+"/r", tok); code != want {
			t.Fatalf("token %v: %d %v, want %d", tok, code, body, want)
		}
	}
	mu.Lock()
	if calls != 1 {
		t.Errorf("ceiling asked %d times for tokens at or below its last answer, want 1", calls)
	}
	rev, fail = 200, errors.New("etcd unreachable")
	mu.Unlock()
	if code, body := put(t, c, srv.URL+"/r", 150); code != http.StatusServiceUnavailable {
		t.Fatalf("token above the known ceiling, ceiling failing: %d %v", code, body)
	}
	mu.Lock()
	fail = nil
	mu.Unlock()
	if code, body := put(t, c, srv.URL+"/r", 150); code != http.StatusNoContent {
		t.Fatalf("token below the new ceiling: %d %v", code, body)
	}
	if got, want := j.tokens(), []fencing.Token{40, 100, 150}; !slices.Equal(got, want) {
		t.Errorf("writes applied %v, want %v", got, want)
	}
}

func TestNewRejectsBadArguments(t *testing.T) {
	var g fencing.Guard
	h := http.NotFoundHandler()
	for _, tc := range []struct {
		name  string
		guard *fencing.Guard
		next  http.Handler
		opts  []httpfence.Option
	}{
		{"nil guard", nil, h, nil},
		{"nil handler", &g, nil, nil},
		{"nil option", &g, h, []httpfence.Option{nil}},
		{"nil resource", &g, h, []httpfence.Option{httpfence.WithResource(nil)}},
		{"nil ceiling", &g, h, []httpfence.Option{httpfence.WithCeiling(nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := httpfence.New(tc.guard, tc.next, tc.opts...); !errors.Is(err, httpfence.ErrInvalidArgument) || got != nil {
				t.Fatalf("New = %v, %v; want ErrInvalidArgument", got, err)
			}
		})
	}
	rec := httptest.NewRecorder()
	httpfence.Middleware(nil, nil, h).ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/r", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("Middleware with a nil guard answered %d, want 500", rec.Code)
	}
}

// http.TimeoutHandler outside the middleware answers 503 when its time is
// up, but the fenced handler still runs to its end inside the resource's
// critical section, so a newer token's handler runs only after it.
func TestTimeoutHandlerOutsideMiddleware(t *testing.T) {
	var g fencing.Guard
	j := &journal{}
	entered, release, applied7 := make(chan struct{}), make(chan struct{}), make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := fencing.FromContext(r.Context())
		if tok == 5 {
			close(entered)
			<-release // still writing after the timeout has answered
		}
		j.ServeHTTP(w, r)
		if tok == 7 {
			close(applied7)
		}
	})
	srv := httptest.NewServer(http.TimeoutHandler(httpfence.Middleware(&g, nil, slow), time.Millisecond, "timed out"))
	t.Cleanup(srv.Close)
	c := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport}}
	if code, _ := put(t, c, srv.URL+"/r", 5); code != http.StatusServiceUnavailable {
		t.Fatalf("token 5, blocked past the time limit: %d", code)
	}
	<-entered
	// Token 7 is answered 503 too if it waits past the limit; its handler
	// runs all the same, once token 5's has finished.
	put(t, c, srv.URL+"/r", 7)
	close(release)
	<-applied7
	if got, want := j.tokens(), []fencing.Token{5, 7}; !slices.Equal(got, want) {
		t.Errorf("writes applied %v, want %v", got, want)
	}
}

// The composition the package doc forbids, shown unsafe: with
// http.TimeoutHandler inside the middleware, the fence is released when
// time is up while the handler goes on, and its late write lands after a
// newer token's.
func TestTimeoutHandlerInsideMiddlewareIsUnsafe(t *testing.T) {
	var g fencing.Guard
	j := &journal{}
	entered, release, applied5 := make(chan struct{}), make(chan struct{}), make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := fencing.FromContext(r.Context())
		if tok == 5 {
			close(entered)
			<-release
			defer close(applied5)
		}
		j.ServeHTTP(w, r)
	})
	// Token 5's request alone gets the time limit: token 7's, not blocked,
	// must not run out of it on a loaded machine.
	limited := http.TimeoutHandler(slow, time.Millisecond, "timed out")
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, _ := fencing.FromContext(r.Context()); tok == 5 {
			limited.ServeHTTP(w, r)
			return
		}
		slow.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(httpfence.Middleware(&g, nil, inner))
	t.Cleanup(srv.Close)
	c := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport}}
	if code, _ := put(t, c, srv.URL+"/r", 5); code != http.StatusServiceUnavailable {
		t.Fatalf("token 5, blocked past the time limit: %d", code)
	}
	<-entered
	if code, _ := put(t, c, srv.URL+"/r", 7); code != http.StatusNoContent {
		t.Fatalf("token 7: %d", code)
	}
	close(release)
	<-applied5
	if got, want := j.tokens(), []fencing.Token{7, 5}; !slices.Equal(got, want) {
		t.Errorf("writes applied %v, want the unsafe order %v", got, want)
	}
}

// Two Fencing-Token headers are refused with 400, equal or not: which one
// counts would depend on the proxies on the way, and a proxy that joins
// header lines turns even equal ones into no token at all. The answer
// says to send exactly one.
func TestMiddlewareRefusesTwoTokenHeaders(t *testing.T) {
	for name, vals := range map[string][]string{"different": {"5", "1"}, "equal": {"5", "5"}} {
		t.Run(name, func(t *testing.T) {
			st := &store{}
			srv, _ := newServer(t, st)
			req, _ := http.NewRequest(http.MethodPut, srv.URL+"/a", nil)
			for _, v := range vals {
				req.Header.Add(fencing.Header, v)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct{ Error string }
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadRequest || st.applied != 0 {
				t.Errorf("headers %v: %d, %d writes applied; want 400 and none", vals, resp.StatusCode, st.applied)
			}
			if !strings.Contains(body.Error, "send exactly one, even with equal values") {
				t.Errorf("headers %v: the answer %q does not say to send exactly one", vals, body.Error)
			}
		})
	}
}
