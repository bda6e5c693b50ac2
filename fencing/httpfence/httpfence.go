package httpfence

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"sync/atomic"

	"github.com/etcdlock/etcdlock/fencing"
)

// ErrNoToken is returned by Transport for a request whose context carries
// no token (see fencing.NewContext).
var ErrNoToken = errors.New("httpfence: request context carries no fencing token")

// ErrInvalidArgument is returned, wrapped, by New for a nil guard, handler
// or option value.
var ErrInvalidArgument = errors.New("httpfence: invalid argument")

// An Option configures New.
type Option interface{ apply(*middleware) error }

type optionFunc func(*middleware) error

func (f optionFunc) apply(m *middleware) error { return f(m) }

// WithResource maps a request to the resource it writes. The default is
// PathResource.
func WithResource(resource func(*http.Request) string) Option {
	return optionFunc(func(m *middleware) error {
		if resource == nil {
			return fmt.Errorf("%w: nil resource function", ErrInvalidArgument)
		}
		m.resource = resource
		return nil
	})
}

// WithCeiling refuses, with 400 Bad Request, a token above what ceiling
// reports (see fencing.Ceiling and etcdfence.Ceiling), before it is
// admitted. ceiling is called only for a token above the highest value it
// has returned so far, so once per new lock owner; if it fails, the request
// is refused with 503 Service Unavailable and nothing is admitted.
//
// The ceiling bounds the harm of a forged token, it does not remove it: a
// forged token at or below the ceiling is admitted and refuses the present
// owner's older token, until the next owner (whose token is newer than the
// ceiling was) writes.
func WithCeiling(ceiling fencing.Ceiling) Option {
	return optionFunc(func(m *middleware) error {
		if ceiling == nil {
			return fmt.Errorf("%w: nil ceiling", ErrInvalidArgument)
		}
		m.ceiling = ceiling
		return nil
	})
}

// PathResource is the default resource of a request: its URL path, cleaned
// as path.Clean does (duplicate and trailing slashes, "." and ".."
// elements removed), so that every spelling of one path shares one mark.
// The path is the decoded one ("/%63" is "/c") and case-sensitive.
func PathResource(r *http.Request) string {
	return path.Clean("/" + r.URL.Path)
}

// Middleware is New with WithResource(resource) (nil resource means
// PathResource). A nil guard or next makes every request fail with 500.
func Middleware(guard *fencing.Guard, resource func(*http.Request) string, next http.Handler) http.Handler {
	var opts []Option
	if resource != nil {
		opts = append(opts, WithResource(resource))
	}
	h, err := New(guard, next, opts...)
	if err != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusInternalServerError, problem{Error: err.Error()})
		})
	}
	return h
}

// New fences next with guard. For each request:
//
//   - a missing or invalid Fencing-Token header, or more than one (even
//     with equal values): 400 Bad Request;
//   - with WithCeiling, a token above the ceiling: 400 Bad Request;
//   - a token older than the newest token admitted for the same resource:
//     409 Conflict, with a JSON body
//     {"error": "...", "resource": "...", "presented": "7", "current": "9"};
//   - otherwise the token is admitted: it becomes the resource's newest
//     (guard.Current returns it) and then next runs, with the token in the
//     request context (fencing.FromContext), while no other request for that
//     resource is checked or handled.
//
// The mark is raised on admission, before next runs, and stays raised
// whatever next answers (an error status included): next may have changed
// the resource before it failed. next must finish every change it makes to
// the resource before it returns (no goroutine that writes later; see
// http.TimeoutHandler in the package doc), and must not call guard.Do or
// guard.Reset for its own resource (that would wait for itself forever);
// guard.Current is safe.
//
// guard holds the marks; share one Guard between all handlers that protect
// the same resources. It lives in memory: a process restart forgets the
// marks, so a resource that must survive restarts should keep its mark
// durably (sqlfence, etcdfence).
func New(guard *fencing.Guard, next http.Handler, opts ...Option) (http.Handler, error) {
	if guard == nil {
		return nil, fmt.Errorf("%w: nil guard", ErrInvalidArgument)
	}
	if next == nil {
		return nil, fmt.Errorf("%w: nil handler", ErrInvalidArgument)
	}
	m := &middleware{guard: guard, next: next, resource: PathResource}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalidArgument)
		}
		if err := o.apply(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

type middleware struct {
	guard    *fencing.Guard
	next     http.Handler
	resource func(*http.Request) string
	ceiling  fencing.Ceiling
	known    atomic.Int64 // highest value ceiling has returned
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	vals := r.Header.Values(fencing.Header)
	if len(vals) > 1 {
		// The field is a singleton (RFC 9110, section 5.3): which of two
		// lines counts would depend on the proxies on the way, and one
		// that joins lines makes even equal ones "7, 7", no token at
		// all. Equal lines are refused too, so that the answer does not
		// depend on the path.
		writeJSON(w, http.StatusBadRequest, problem{Error: fmt.Sprintf("%d %s header lines: send exactly one, even with equal values", len(vals), fencing.Header)})
		return
	}
	raw := r.Header.Get(fencing.Header)
	if raw == "" {
		writeJSON(w, http.StatusBadRequest, problem{Error: "missing " + fencing.Header + " header"})
		return
	}
	tok, err := fencing.ParseToken(raw)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, problem{Error: err.Error()})
		return
	}
	if code, err := m.checkCeiling(r, tok); err != nil {
		writeJSON(w, code, problem{Error: err.Error(), Presented: tok.String()})
		return
	}
	res := m.resource(r)
	err = m.guard.Do(res, tok, func() error {
		m.next.ServeHTTP(w, r.WithContext(fencing.NewContext(r.Context(), tok)))
		return nil
	})
	var stale *fencing.StaleTokenError
	if errors.As(err, &stale) {
		writeJSON(w, http.StatusConflict, problem{
			Error: "stale fencing token", Resource: res,
			Presented: stale.Presented.String(), Current: stale.Current.String(),
		})
	}
}

// checkCeiling refuses a token above the ceiling, asking the ceiling only
// when tok is above every value it has returned before.
func (m *middleware) checkCeiling(r *http.Request, tok fencing.Token) (int, error) {
	if m.ceiling == nil || int64(tok) <= m.known.Load() {
		return 0, nil
	}
	c, err := m.ceiling(r.Context())
	if err != nil {
		return http.StatusServiceUnavailable, fmt.Errorf("httpfence: cannot check token %s against the ceiling: %w", tok, err)
	}
	for {
		known := m.known.Load()
		if int64(c) <= known || m.known.CompareAndSwap(known, int64(c)) {
			break
		}
	}
	if tok > c {
		return http.StatusBadRequest, fmt.Errorf("%w: %s is above the ceiling %s", fencing.ErrNotIssued, tok, c)
	}
	return 0, nil
}

type problem struct {
	Error     string `json:"error"`
	Resource  string `json:"resource,omitempty"`
	Presented string `json:"presented,omitempty"`
	Current   string `json:"current,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// Transport sets the Fencing-Token header of every request from the token
// in the request's context, and refuses (ErrNoToken) requests without one.
type Transport struct {
	// Base performs the request; nil means http.DefaultTransport.
	Base http.RoundTripper
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip implements http.RoundTripper. It does not modify req.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, ok := fencing.FromContext(req.Context())
	if !ok || !tok.IsValid() {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%w: %s %s", ErrNoToken, req.Method, req.URL)
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	r := req.Clone(req.Context())
	r.Header.Set(fencing.Header, tok.String())
	return base.RoundTrip(r)
}
