package fencing_test

import (
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/internal/fencetest"
)

// Many writers present interleaved tokens; a write is stale if a newer
// token has already written. None may be applied, and the newest writer's
// data must be what remains.
func TestGuardConcurrentWriters(t *testing.T) {
	var g fencing.Guard
	const writers, perWriter = 16, 200
	var (
		mu           sync.Mutex    // guards the "resource" below; Guard serializes, this only satisfies -race bookkeeping
		value        fencing.Token // the resource's data: the token of the last write applied
		newest       fencing.Token // highest token applied so far
		applied      int
		staleApplied int
		rejected     int
		wg           sync.WaitGroup
	)
	tokens := fencetest.Tokens(writers*perWriter, 32, 4)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tok := range tokens {
				err := g.Do("r", tok, func() error {
					runtime.Gosched() // widen the window a split check would expose
					mu.Lock()
					defer mu.Unlock()
					if tok < newest {
						staleApplied++
					}
					newest = max(newest, tok)
					value = tok
					applied++
					return nil
				})
				var stale *fencing.StaleTokenError
				switch {
				case err == nil:
				case errors.As(err, &stale):
					if stale.Presented != tok || stale.Current <= tok {
						t.Errorf("stale error %+v for token %v", stale, tok)
					}
					mu.Lock()
					rejected++
					mu.Unlock()
				default:
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	top := fencing.Token(writers * perWriter / 4)
	t.Logf("writes attempted %d, applied %d, stale rejected %d, stale applied %d", writers*perWriter, applied, rejected, staleApplied)
	if staleApplied != 0 {
		t.Errorf("%d stale writes applied", staleApplied)
	}
	if applied+rejected != writers*perWriter {
		t.Errorf("applied %d + rejected %d != %d", applied, rejected, writers*perWriter)
	}
	if value != top || g.Current("r") != top {
		t.Errorf("resource holds %v (mark %v), want newest token %v", value, g.Current("r"), top)
	}
}

func TestGuardSemantics(t *testing.T) {
	var g fencing.Guard
	ok := func() error { return nil }
	if err := g.Do("a", 5, ok); err != nil {
		t.Fatal(err)
	}
	if err := g.Do("a", 5, ok); err != nil {
		t.Errorf("equal token rejected: %v", err)
	}
	ran := false
	err := g.Do("a", 4, func() error { ran = true; return nil })
	if !errors.Is(err, fencing.ErrStaleToken) || ran {
		t.Errorf("older token: err %v ran %v", err, ran)
	}
	if err := g.Do("b", 1, ok); err != nil {
		t.Errorf("resources are independent: %v", err)
	}
	boom := errors.New("boom")
	if err := g.Do("a", 9, func() error { return boom }); err != boom {
		t.Errorf("write error = %v", err)
	}
	if g.Current("a") != 5 {
		t.Errorf("failed write moved the mark to %v", g.Current("a"))
	}
	if err := g.Do("a", 0, ok); !errors.Is(err, fencing.ErrInvalidToken) {
		t.Errorf("zero token: %v", err)
	}
}
