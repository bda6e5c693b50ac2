// Package httpfence fences HTTP resources with etcdlock tokens.
//
// New (or Middleware) wraps a handler: each request must carry a
// Fencing-Token header; requests for one resource are checked and handled
// one at a time, and a token older than the newest the resource has
// admitted is refused with 409 Conflict before the handler runs. Transport
// is the client side: it copies the token from the request's context into
// the header.
//
// # When the mark is raised
//
// A token is admitted when it is at least the resource's mark; the mark is
// raised to it at that moment, before the handler runs, and is never
// lowered by what the handler does next. A handler that answers an error
// status (or 103 Early Hints and then an error) has still been admitted:
// it may have applied its write before it failed, and an older token must
// not write after it. The status a handler answers with plays no part.
//
// # What a handler must do
//
// Make every change to the resource before ServeHTTP returns: the
// resource's critical section ends when the handler returns, and a newer
// token's handler may then run. A handler must not call Guard.Do or
// Guard.Reset for its own resource (it would wait for itself forever);
// Guard.Current is safe, and returns the handler's own token. Its token is
// also in the request context (fencing.FromContext).
//
// # Resources
//
// The default resource of a request is PathResource: the URL path cleaned
// as path.Clean does, so "/c", "/c/", "//c" and "/x/../c" share one mark.
// A resource function given with WithResource must map every spelling of
// one resource to one string in the same way.
//
// # http.TimeoutHandler
//
// Put http.TimeoutHandler outside the fence, never inside:
//
//	http.TimeoutHandler(httpfence.Middleware(&guard, nil, h), d, msg) // right
//	httpfence.Middleware(&guard, nil, http.TimeoutHandler(h, d, msg)) // wrong
//
// Outside, the client gets 503 when time is up but h keeps the resource's
// critical section until it returns, so no newer token's handler runs
// before it has finished; the outcome of the timed-out request is unknown
// to the client, as with any timeout. Inside, TimeoutHandler returns when
// time is up while h goes on running in its own goroutine: the fence is
// released, a newer token is admitted, and h's late write lands after the
// newer one's. The same holds for any handler that leaves work running
// after it returns.
//
// # Poisoned marks
//
// A token far above any real one (a forged or mistyped header) would be
// admitted and then refuse every real token. WithCeiling(etcdfence.Ceiling(cli))
// refuses a token above the lock's etcd revision, which no lock can have
// issued, with 400 before it is admitted; a forged token below the ceiling
// holds only until the next lock owner writes. Without a ceiling, an
// operator recovers with Guard.Reset; the marks also live only as long as
// the process.
package httpfence
