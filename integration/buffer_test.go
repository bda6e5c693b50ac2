package integration

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is an io.Writer the exec copier and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor returns once the buffer holds want, failing t if it does not
// within the bound.
func (l *lockedBuffer) waitFor(t *testing.T, want string, within time.Duration) {
	t.Helper()
	end := time.Now().Add(within)
	for !strings.Contains(l.String(), want) {
		if time.Now().After(end) {
			t.Fatalf("no %q within %v; output:\n%s", want, within, l.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
