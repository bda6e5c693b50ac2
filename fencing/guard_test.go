package fencing_test

import (
	"errors"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

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
	if g.Current("a") != 9 {
		t.Errorf("an admitted token's failed write left the mark at %v, want 9", g.Current("a"))
	}
	if err := g.Do("a", 0, ok); !errors.Is(err, fencing.ErrInvalidToken) {
		t.Errorf("zero token: %v", err)
	}
}

// A write that fails after it may have changed the resource still raises
// the mark: the mark is raised when the token is admitted, so an older
// token can never write after it.
func TestGuardRemembersAdmittedToken(t *testing.T) {
	var g fencing.Guard
	var applied []fencing.Token
	write := func(tok fencing.Token, err error) func() error {
		return func() error { applied = append(applied, tok); return err }
	}
	if err := g.Do("r", 5, write(5, nil)); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("failed after the write")
	if err := g.Do("r", 7, write(7, boom)); !errors.Is(err, boom) {
		t.Fatalf("failing write: %v", err)
	}
	if got := g.Current("r"); got != 7 {
		t.Errorf("mark after an admitted token's failed write = %v, want 7", got)
	}
	err := g.Do("r", 6, write(6, nil))
	var stale *fencing.StaleTokenError
	if !errors.As(err, &stale) || stale.Current != 7 {
		t.Errorf("token 6 after admitted 7: %v", err)
	}
	if want := []fencing.Token{5, 7}; !slices.Equal(applied, want) {
		t.Errorf("writes applied in token order %v, want %v", applied, want)
	}
}

// Current may be called from inside Do for the same resource: it does not
// wait for the write in progress, and reports the token that write was
// admitted with.
func TestGuardCurrentInsideDo(t *testing.T) {
	var g fencing.Guard
	done := make(chan error, 1)
	var inside fencing.Token
	go func() {
		done <- g.Do("r", 3, func() error { inside = g.Current("r"); return nil })
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // a bound on a deadlock, not a timing assertion
		t.Fatal("Current inside Do for the same resource did not return")
	}
	if inside != 3 {
		t.Errorf("Current inside Do = %v, want the admitted token 3", inside)
	}
}

// A token no lock could have issued, once admitted, refuses every real
// token until an operator resets the mark.
func TestGuardResetRecoversFromPoisonedMark(t *testing.T) {
	var g fencing.Guard
	ok := func() error { return nil }
	if err := g.Do("r", math.MaxInt64, ok); err != nil {
		t.Fatal(err)
	}
	if err := g.Do("r", 12, ok); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("real token after a poisoned mark: %v", err)
	}
	if _, err := g.Reset("r", -1); !errors.Is(err, fencing.ErrInvalidToken) {
		t.Errorf("Reset to -1: %v", err)
	}
	old, err := g.Reset("r", 10)
	if err != nil || old != math.MaxInt64 {
		t.Fatalf("Reset = %v, %v", old, err)
	}
	if err := g.Do("r", 9, ok); !errors.Is(err, fencing.ErrStaleToken) {
		t.Errorf("token below the reset mark: %v", err)
	}
	if err := g.Do("r", 12, ok); err != nil {
		t.Errorf("real token after Reset: %v", err)
	}
	if got := g.Current("r"); got != 12 {
		t.Errorf("Current = %v, want 12", got)
	}
	if got := g.Current("never-written"); got != 0 {
		t.Errorf("Current of an unknown resource = %v", got)
	}
}

// A write that panics releases the resource with the mark raised.
func TestGuardWritePanics(t *testing.T) {
	var g fencing.Guard
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the write's panic did not reach the caller")
			}
		}()
		_ = g.Do("r", 4, func() error { panic("write panicked") })
	}()
	if got := g.Current("r"); got != 4 {
		t.Errorf("mark after a panicking write = %v, want 4", got)
	}
	if err := g.Do("r", 4, func() error { return nil }); err != nil {
		t.Errorf("the resource after a panicking write: %v", err)
	}
}
