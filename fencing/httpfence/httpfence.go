// Package httpfence fences HTTP resources with etcdlock tokens.
//
// Middleware wraps a handler: each request must carry a Fencing-Token
// header; requests for one resource are checked and handled one at a time,
// and a token older than the newest that has succeeded is refused with 409
// Conflict before the handler runs. Transport is the client side: it copies
// the token from the request's context into the header.
package httpfence

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/etcdlock/etcdlock/fencing"
)

// ErrNoToken is returned by Transport for a request whose context carries
// no token (see fencing.NewContext).
var ErrNoToken = errors.New("httpfence: request context carries no fencing token")

// Middleware fences next. resource maps a request to the resource it writes
// (nil means r.URL.Path). For each request:
//
//   - a missing or invalid Fencing-Token header: 400 Bad Request;
//   - a token older than the newest token that has succeeded on the same
//     resource: 409 Conflict, with a JSON body
//     {"error": "...", "resource": "...", "presented": "7", "current": "9"};
//   - otherwise next runs, with the token in the request context
//     (fencing.FromContext), while no other request for that resource is
//     checked or handled. If next answers with a status below 400, the token
//     becomes the resource's newest.
//
// guard holds the high-water marks; share one Guard between all middleware
// instances that protect the same resources. It lives in memory: a process
// restart forgets the marks, so a resource that must survive restarts
// should keep its mark durably (sqlfence, etcdfence).
func Middleware(guard *fencing.Guard, resource func(*http.Request) string, next http.Handler) http.Handler {
	if resource == nil {
		resource = func(r *http.Request) string { return r.URL.Path }
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		res := resource(r)
		errHandlerFailed := errors.New("handler failed")
		err = guard.Do(res, tok, func() error {
			rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
			next.ServeHTTP(rec, r.WithContext(fencing.NewContext(r.Context(), tok)))
			if rec.status >= 400 {
				return errHandlerFailed
			}
			return nil
		})
		var stale *fencing.StaleTokenError
		if errors.As(err, &stale) {
			writeJSON(w, http.StatusConflict, problem{
				Error: "stale fencing token", Resource: res,
				Presented: stale.Presented.String(), Current: stale.Current.String(),
			})
		}
	})
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

type statusRecorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wroteHeader {
		s.status, s.wroteHeader = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wroteHeader = true
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

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
