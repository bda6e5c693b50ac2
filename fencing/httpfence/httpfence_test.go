package httpfence_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/httpfence"
	"github.com/etcdlock/etcdlock/fencing/internal/fencetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// store is a protected resource: it records every write it applies.
type store struct {
	mu      sync.Mutex
	value   fencing.Token            // last write applied, any path
	newest  map[string]fencing.Token // per path
	applied int
	stale   int
}

func (s *store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, ok := fencing.FromContext(r.Context())
	if !ok {
		http.Error(w, "no token in context", http.StatusInternalServerError)
		return
	}
	if r.URL.Query().Get("fail") != "" {
		http.Error(w, "write failed", http.StatusInternalServerError)
		return
	}
	runtime.Gosched()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.newest == nil {
		s.newest = map[string]fencing.Token{}
	}
	if tok < s.newest[r.URL.Path] {
		s.stale++
	}
	s.newest[r.URL.Path] = max(s.newest[r.URL.Path], tok)
	s.value = tok
	s.applied++
	w.WriteHeader(http.StatusNoContent)
}

func newServer(t *testing.T, st *store) (*httptest.Server, *http.Client) {
	var g fencing.Guard
	srv := httptest.NewServer(httpfence.Middleware(&g, nil, st))
	t.Cleanup(srv.Close)
	return srv, &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport}}
}

func put(t *testing.T, c *http.Client, url string, tok fencing.Token) (int, map[string]string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(fencing.NewContext(context.Background(), tok), http.MethodPut, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := map[string]string{}
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &body)
	return resp.StatusCode, body
}

func TestMiddlewareStatusCodes(t *testing.T) {
	st := &store{}
	srv, c := newServer(t, st)
	if code, _ := put(t, c, srv.URL+"/a", 5); code != http.StatusNoContent {
		t.Fatalf("first write: %d", code)
	}
	if code, _ := put(t, c, srv.URL+"/a", 5); code != http.StatusNoContent {
		t.Fatalf("equal token: %d", code)
	}
	code, body := put(t, c, srv.URL+"/a", 4)
	if code != http.StatusConflict || body["current"] != "5" || body["presented"] != "4" || body["resource"] != "/a" {
		t.Fatalf("stale write: %d %v", code, body)
	}
	if code, _ := put(t, c, srv.URL+"/b", 1); code != http.StatusNoContent {
		t.Fatalf("other resource: %d", code)
	}
	// A failing handler's token was admitted: it raised the mark.
	if code, _ := put(t, c, srv.URL+"/a?fail=1", 6); code != http.StatusInternalServerError {
		t.Fatalf("failing handler: %d", code)
	}
	if code, _ := put(t, c, srv.URL+"/a", 5); code != http.StatusConflict {
		t.Fatalf("older token after a failed newer one: %d", code)
	}
	if code, _ := put(t, c, srv.URL+"/a", 6); code != http.StatusNoContent {
		t.Fatalf("equal token after its failed write: %d", code)
	}
	for _, h := range []string{"", "abc", "-1", "0"} {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/a", nil)
		if h != "" {
			req.Header.Set(fencing.Header, h)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("header %q: %d, want 400", h, resp.StatusCode)
		}
	}
	if st.value != 6 || st.stale != 0 {
		t.Errorf("store value %v stale %d", st.value, st.stale)
	}
}

func TestTransportRequiresToken(t *testing.T) {
	_, c := newServer(t, &store{})
	_, err := c.Get("http://127.0.0.1:1/")
	if !errors.Is(err, httpfence.ErrNoToken) {
		t.Fatalf("request without token: %v", err)
	}
}

func TestMiddlewareConcurrentWriters(t *testing.T) {
	st := &store{}
	srv, c := newServer(t, st)
	const writers, attempts = 8, 800
	tokens := fencetest.Tokens(attempts, 16, 2)
	var (
		mu       sync.Mutex
		rejected int
		wg       sync.WaitGroup
	)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tok := range tokens {
				code, _ := put(t, c, srv.URL+"/r", tok)
				switch code {
				case http.StatusNoContent:
				case http.StatusConflict:
					mu.Lock()
					rejected++
					mu.Unlock()
				default:
					t.Errorf("token %v: status %d", tok, code)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("writes attempted %d, applied %d, stale rejected %d, stale applied %d", attempts, st.applied, rejected, st.stale)
	if st.stale != 0 {
		t.Errorf("%d stale writes applied", st.stale)
	}
	if st.applied+rejected != attempts {
		t.Errorf("applied %d + rejected %d != %d", st.applied, rejected, attempts)
	}
	if st.value != attempts/2 {
		t.Errorf("resource holds %v, want newest %d", st.value, attempts/2)
	}
}
