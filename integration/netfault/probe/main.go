//go:build linux

// Command probe is the network fault harness's workload over pkg/lock's
// public API, run inside a client's network namespace.
//
//	probe leader ENDPOINTS
//
// prints the client URL of the member that says it leads (exit 1 if none
// answers so within 2 s).
//
//	probe measure ENDPOINTS PREFIX TTL DURATION
//
// repeats rounds until DURATION has passed, and prints one JSON line per
// timed step: "session" (NewSession), "acquire" (Acquire of a free name),
// "handoff" (the holder's Release called → the queued waiter's Acquire
// returned), "notice" (an operator's delete of the holder's key answered →
// the holder's Lost closed). Every step is bounded by stepBound: a step
// still blocked then is printed with "err": "bound".
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// stepBound bounds every timed step: a step that takes it is a stall.
const stepBound = 20 * time.Second

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: probe leader ENDPOINTS | probe measure ENDPOINTS PREFIX TTL DURATION")
		os.Exit(2)
	}
	eps := strings.Split(os.Args[2], ",")
	var err error
	switch {
	case os.Args[1] == "leader":
		err = leader(eps)
	case os.Args[1] == "measure" && len(os.Args) == 6:
		var ttl, d time.Duration
		if ttl, err = time.ParseDuration(os.Args[4]); err == nil {
			if d, err = time.ParseDuration(os.Args[5]); err == nil {
				err = measure(eps, os.Args[3], ttl, d)
			}
		}
	default:
		err = errors.New("unknown command")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

func newClient(eps []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
}

// leader prints the client URL of the member whose status names itself
// as the leader.
func leader(eps []string) error {
	cli, err := newClient(eps)
	if err != nil {
		return err
	}
	defer cli.Close()
	for _, ep := range eps {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := cli.Status(ctx, ep)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			fmt.Println(ep)
			return nil
		}
	}
	return errors.New("no member says it leads")
}

// step is one printed measurement.
type step struct {
	Op  string  `json:"op"`
	Ms  float64 `json:"ms"`
	Err string  `json:"err,omitempty"`
}

func emit(op string, d time.Duration, err error) {
	s := step{Op: op, Ms: float64(d.Microseconds()) / 1000}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		s.Err = "bound"
	case err != nil:
		s.Err = err.Error()
	}
	b, _ := json.Marshal(s)
	fmt.Println(string(b))
}

// measure runs rounds until d has passed.
func measure(eps []string, prefix string, ttl, d time.Duration) error {
	cli, err := newClient(eps)
	if err != nil {
		return err
	}
	defer cli.Close()
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		round(cli, fmt.Sprintf("r%d", i), prefix, ttl)
	}
	return nil
}

// round times one of each step, on names of its own.
func round(cli *clientv3.Client, id, prefix string, ttl time.Duration) {
	opts := []lock.SessionOption{lock.WithTTL(ttl), lock.WithPrefix(prefix)}
	ctx, cancel := context.WithTimeout(context.Background(), stepBound)
	start := time.Now()
	s1, err := lock.NewSession(ctx, cli, opts...)
	cancel()
	emit("session", time.Since(start), err)
	if err != nil {
		return
	}
	defer closeSession(s1)
	ctx, cancel = context.WithTimeout(context.Background(), stepBound)
	start = time.Now()
	l1, err := s1.Acquire(ctx, id)
	cancel()
	emit("acquire", time.Since(start), err)
	if err != nil {
		return
	}
	ctx, cancel = context.WithTimeout(context.Background(), stepBound)
	s2, err := lock.NewSession(ctx, cli, opts...)
	cancel()
	if err != nil {
		return
	}
	defer closeSession(s2)
	queued := make(chan struct{}, 1)
	type acquired struct {
		l   *lock.Lock
		err error
		at  time.Time
	}
	got := make(chan acquired, 1)
	wctx, wcancel := context.WithTimeout(context.Background(), 2*stepBound)
	defer wcancel()
	go func() {
		l, err := s2.Acquire(wctx, id, lock.WithWaitHook(func() {
			select {
			case queued <- struct{}{}:
			default:
			}
		}))
		got <- acquired{l, err, time.Now()}
	}()
	select {
	case <-queued:
	case a := <-got: // the waiter never queued: no handoff to time
		if a.l != nil {
			releaseQuietly(a.l)
		}
		releaseQuietly(l1)
		return
	}
	ctx, cancel = context.WithTimeout(context.Background(), stepBound)
	start = time.Now()
	_ = l1.Release(ctx)
	cancel()
	var a acquired
	select {
	case a = <-got:
		emit("handoff", a.at.Sub(start), a.err)
	case <-time.After(stepBound - time.Since(start)):
		emit("handoff", time.Since(start), context.DeadlineExceeded)
		wcancel()
		a = <-got
	}
	if a.err != nil {
		return
	}
	ctx, cancel = context.WithTimeout(context.Background(), stepBound)
	_, err = cli.Delete(ctx, a.l.Key())
	cancel()
	if err != nil {
		releaseQuietly(a.l)
		return
	}
	start = time.Now()
	select {
	case <-a.l.Context().Done():
		emit("notice", time.Since(start), nil)
	case <-time.After(stepBound):
		emit("notice", time.Since(start), context.DeadlineExceeded)
	}
	releaseQuietly(a.l)
}

func releaseQuietly(l *lock.Lock) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.Release(ctx)
}

func closeSession(s *lock.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Close(ctx)
}
