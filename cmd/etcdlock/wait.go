package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
	"github.com/etcdlock/etcdlock/cmd/internal/signals"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// acquireWaiting acquires names, reporting who holds each of them while
// it waits.
func acquireWaiting(ctx context.Context, g *globalOptions, s *session, names []string, o *runOptions, sigc <-chan os.Signal) (*lock.Lock, error) {
	name := names[0]
	// --timeout bounds the wait for holders, not the requests that take a
	// free lock, however short it is: try first (a lock-delay is a wait
	// that --timeout bounds, and a set has no try).
	firstTry := o.timeout > 0 && len(names) == 1 && o.lockDelay == 0
	if o.try || firstTry {
		// A --try waits for no holder, but does wait out a lock-delay.
		// Bounded as every request, so that a try that gets no answer
		// has its diagnosis when it fails (see diagnose).
		rctx, cancel := g.requestCtxFor(ctx, g.requestTimeout+o.lockDelay)
		defer cancel()
		l, err := s.TryAcquire(rctx, name, o.acquireOptions()...)
		var locked *lock.LockedError
		switch {
		case err == nil:
			return l, nil
		case o.try || !errors.As(err, &locked):
			return nil, g.withHolders(ctx, s.cli, lostWaiting(err, name), name)
		}
	}
	return waitFor(ctx, g, s, names, o, sigc)
}

// waitFor acquires names, waiting for their holders within --timeout. A
// signal on sigc ends the wait (exit 128+N), and releases the lock if it
// came as the lock was granted.
func waitFor(ctx context.Context, g *globalOptions, s *session, names []string, o *runOptions, sigc <-chan os.Signal) (*lock.Lock, error) {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if o.timeout > 0 {
		var c2 context.CancelFunc
		wctx, c2 = context.WithTimeoutCause(wctx, o.timeout, errWaitTimeout)
		defer c2()
	}
	began := time.Now()
	w := watchWait(wctx, cancel, g, s, names, sigc)
	var l *lock.Lock
	var err error
	if len(names) > 1 {
		l, err = s.AcquireAll(wctx, names, w.hook())
	} else {
		l, err = s.Acquire(wctx, names[0], append(o.acquireOptions(), w.hook())...)
	}
	interrupted := w.stop()
	if err == nil && interrupted != nil {
		// The signal came as the lock was granted: honour it.
		relCtx, relCancel := g.requestCtx(context.WithoutCancel(ctx))
		defer relCancel()
		_ = l.Release(relCtx)
	}
	if err == nil && interrupted == nil {
		if w.waited.Load() {
			g.printer.Note("acquired %s (token %s) after waiting %v", lockNames(names), l.Token(), time.Since(began).Round(time.Millisecond))
		}
		return l, nil
	}
	switch cause := context.Cause(wctx); {
	case interrupted != nil:
		sig := interrupted.(syscall.Signal)
		return nil, &exitErr{code: exitcode.SignalBase + int(sig), signal: sig,
			err: fmt.Errorf("interrupted by %s while waiting for %s", signals.Name(sig), lockNames(names))}
	case errors.Is(cause, errWaitTimeout):
		return nil, fmt.Errorf("%w after %v waiting for %s", errWaitTimeout, o.timeout, lockNames(names))
	}
	return nil, lostWaiting(err, names[0])
}

// waitWatch runs beside one wait for a lock's names: a reporter per name
// says who holds it (a set waits for whichever of its names is held), and
// a watcher interrupts the wait at the first signal. Its goroutines run
// until stop, which waits for them.
type waitWatch struct {
	end       context.CancelFunc // ends the reporters and the watcher
	reporters sync.WaitGroup
	watched   chan struct{}  // closed when the watcher has returned
	waiting   chan struct{}  // closed when the acquisition waits
	waits     sync.Once      // closes waiting
	waited    atomic.Bool    // a reporter said who holds a name
	intr      chan os.Signal // the signal that interrupted the wait
}

// watchWait starts the watch of the wait of wctx for names: a signal on
// sigc ends wctx through interrupt.
func watchWait(wctx context.Context, interrupt context.CancelCauseFunc, g *globalOptions, s *session, names []string, sigc <-chan os.Signal) *waitWatch {
	rctx, end := context.WithCancel(wctx)
	w := &waitWatch{end: end, watched: make(chan struct{}), waiting: make(chan struct{}), intr: make(chan os.Signal, 1)}
	for _, n := range names {
		w.reporters.Go(func() {
			if reportHolders(rctx, g, s, n, w.waiting) {
				w.waited.Store(true)
			}
		})
	}
	go w.watch(rctx, interrupt, sigc)
	return w
}

// hook is the acquisition's wait hook: the reporters report once it
// waits.
func (w *waitWatch) hook() lock.AcquireOption {
	return lock.WithWaitHook(func() { w.waits.Do(func() { close(w.waiting) }) })
}

// watch interrupts the wait at the first signal on sigc, until ctx ends.
func (w *waitWatch) watch(ctx context.Context, interrupt context.CancelCauseFunc, sigc <-chan os.Signal) {
	defer close(w.watched)
	select {
	case sig := <-sigc:
		w.intr <- sig
		interrupt(errors.New("interrupted"))
	case <-ctx.Done():
	}
}

// stop ends the watch and waits for its goroutines. It returns the signal
// that interrupted the wait, nil if none did.
func (w *waitWatch) stop() os.Signal {
	w.end()
	<-w.watched
	w.reporters.Wait()
	select {
	case sig := <-w.intr:
		return sig
	default:
		return nil
	}
}
