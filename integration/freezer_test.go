package integration

import (
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// The harness of the tests in cli_frozen_test.go; the helpers all suites
// share are in helpers_test.go.

// freezer is a TCP proxy in front of an etcd that freezes, as a SIGSTOPped
// etcd does, at the first gRPC call to a chosen method: from that call on
// it forwards nothing, either way, while it goes on reading what the
// client sends. It records the method of every call the client makes, so
// that a test sees which requests a client sent to a frozen etcd.
type freezer struct {
	target   string // host:port of the etcd
	freezeAt string // a method ("/etcdserverpb.KV/Range"); "" freezes at the first call; onDemand at freeze
	ln       net.Listener

	mu     sync.Mutex
	frozen bool
	calls  []string // every call's method, in order
	after  int      // calls[after:] were sent once frozen (the first is the one that froze it)
	probes []int    // per connection that did not speak HTTP/2 (a TLS probe): how many calls came before it
	conns  []net.Conn
	wg     sync.WaitGroup
}

// newFreezer starts a freezer in front of the etcd at endpoint; its address
// is f.addr(). It stops with the test.
func newFreezer(t *testing.T, endpoint, freezeAt string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{target: strings.TrimPrefix(endpoint, "http://"), freezeAt: freezeAt, ln: ln}
	f.wg.Go(f.accept)
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *freezer) addr() string { return f.ln.Addr().String() }

// callsOnceFrozen returns the calls the client sent from the freeze on.
func (f *freezer) callsOnceFrozen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.frozen {
		return nil
	}
	return append([]string(nil), f.calls[f.after:]...)
}

func (f *freezer) accept() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", f.target)
		if err != nil {
			c.Close()
			continue
		}
		f.mu.Lock()
		f.conns = append(f.conns, c, s)
		f.mu.Unlock()
		f.wg.Go(func() { f.fromServer(s, c) })
		f.wg.Go(func() { f.fromClient(c, s) })
	}
}

// fromServer forwards the server's bytes until the freeze, then drops them.
func (f *freezer) fromServer(s, c net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 && !f.isFrozen() {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (f *freezer) isFrozen() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen
}

const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// fromClient reads the client's HTTP/2 frames, records the method of each
// new call, and forwards the frames until the freeze.
func (f *freezer) fromClient(c, s net.Conn) {
	preface := make([]byte, len(http2Preface))
	if _, err := io.ReadFull(c, preface); err != nil {
		return
	}
	if string(preface) != http2Preface {
		// A probe of the endpoint (a TLS ClientHello): a frozen etcd
		// accepts the connection and never answers.
		f.mu.Lock()
		f.probes = append(f.probes, len(f.calls))
		f.mu.Unlock()
		_, _ = io.Copy(io.Discard, c)
		return
	}
	if _, err := s.Write(preface); err != nil {
		return
	}
	dec := hpack.NewDecoder(4096, nil)
	var block []byte // a header block being read (HEADERS, CONTINUATION...)
	for {
		hdr := make([]byte, 9)
		if _, err := io.ReadFull(c, hdr); err != nil {
			return
		}
		length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, flags := hdr[3], hdr[4]
		payload := make([]byte, length)
		if _, err := io.ReadFull(c, payload); err != nil {
			return
		}
		const (
			frameHeaders, frameContinuation               = 0x1, 0x9
			flagEndHeaders, flagPadded, flagPriority byte = 0x4, 0x8, 0x20
		)
		switch typ {
		case frameHeaders:
			p := payload
			pad := 0
			if flags&flagPadded != 0 && len(p) > 0 {
				pad, p = int(p[0]), p[1:]
			}
			if flags&flagPriority != 0 && len(p) >= 5 {
				p = p[5:]
			}
			block = append([]byte(nil), p[:max(len(p)-pad, 0)]...)
		case frameContinuation:
			block = append(block, payload...)
		}
		if (typ == frameHeaders || typ == frameContinuation) && flags&flagEndHeaders != 0 {
			fields, err := dec.DecodeFull(block)
			if err != nil {
				return
			}
			for _, hf := range fields {
				if hf.Name == ":path" {
					f.call(hf.Value)
				}
			}
			block = nil
		}
		if !f.isFrozen() {
			frame := append(hdr, payload...)
			if _, err := s.Write(frame); err != nil {
				return
			}
		}
	}
}

// probesOnceFrozen returns, for each probe of the endpoint since the
// freeze, how many calls the client had sent once frozen when it came.
func (f *freezer) probesOnceFrozen() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n []int
	for _, p := range f.probes {
		if f.frozen && p > f.after {
			n = append(n, p-f.after)
		}
	}
	return n
}

// allCalls returns every call's method, in order.
func (f *freezer) allCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// sent reports whether the client has sent a call to method.
func (f *freezer) sent(method string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.calls, method)
}

// onDemand is the freezeAt of a freezer that freezes only when the test
// calls freeze.
const onDemand = "on demand"

// freeze freezes f now: the next call is the first sent once frozen.
func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.frozen {
		f.frozen, f.after = true, len(f.calls)
	}
}

// call records a call's method, and freezes at freezeAt.
func (f *freezer) call(method string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method)
	if !f.frozen && (f.freezeAt == "" || method == f.freezeAt) {
		f.frozen, f.after = true, len(f.calls)-1
	}
}
