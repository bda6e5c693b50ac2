//go:build linux

package ctrlmanager_test

// The paused-leader test's child: a controller process of its own.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/etcdfence"
	"github.com/etcdlock/etcdlock/pkg/kubelock"
	"github.com/etcdlock/etcdlock/pkg/kubelock/ctrlmanager"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// monotonic returns CLOCK_MONOTONIC, the clock the parent and its
// children share.
func monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// asChild runs the process as a paused-leader child if the parent made it
// one, and returns its exit code and true.
func asChild() (int, bool) {
	who := os.Getenv(pausedChildEnv)
	if who == "" {
		return 0, false
	}
	return pausedChild(who), true
}

// pausedChild is a controller process: a controller-runtime manager set up
// with Options on an etcd lock, whose leader-only Runnable does units of
// work until its context ends (ten more after it, if the parent says deaf),
// each fenced with the term's token. It
// prints a line per event on stdout (written at once, unbuffered) and
// returns the process's exit code once the manager's Start returned (the
// election lost, or SIGTERM).
func pausedChild(who string) int {
	emit := func(event string, unit int, token fencing.Token, rev int64, detail string) {
		fmt.Fprintf(os.Stdout, "%d %s %d %d %d %s\n", monotonic(), event, unit, token, rev,
			strings.ReplaceAll(detail, "\n", " "))
	}
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", who, err)
		return 1
	}
	prefix, resource := os.Getenv(pausedPrefixEnv), os.Getenv(pausedResourceEnv)
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(os.Getenv(pausedEndpointsEnv), ","),
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fail(err)
	}
	defer cli.Close()
	lk, err := kubelock.New(cli, "ctl", who, short.timings, lock.WithPrefix(prefix), lock.WithTTL(short.ttl))
	if err != nil {
		return fail(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = lk.Close(ctx)
	}()
	opts, err := ctrlmanager.Options(lk, manager.Options{LeaderElection: true, LeaderElectionReleaseOnCancel: true})
	if err != nil {
		return fail(err)
	}
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.Logger = logr.Discard()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	host := l.Addr().String()
	l.Close()
	m, err := manager.New(&rest.Config{Host: "http://" + host}, opts) // no API server
	if err != nil {
		return fail(err)
	}
	ran := make(chan struct{})
	err = m.Add(manager.RunnableFunc(func(ctx context.Context) error {
		defer close(ran)
		term, err := lk.Term()
		if err != nil {
			return err
		}
		deaf, after := os.Getenv(pausedDeafEnv) == "true", 0
		for unit := 0; ; unit++ {
			if ctx.Err() != nil {
				if !deaf || after == 10 {
					return nil
				}
				after++
			}
			emit("begin", unit, term.Token(), 0, "")
			// The unit, once begun, runs to its end without looking at
			// ctx, as a reconciler's step does; its write is fenced.
			time.Sleep(20 * time.Millisecond)
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			resp, err := etcdfence.Commit(wctx, cli, lk.Key(), term.Token(), clientv3.OpPut(resource, fmt.Sprintf("%s %d", who, unit)))
			cancel()
			var stale *fencing.StaleTokenError
			switch {
			case err == nil:
				emit("wrote", unit, term.Token(), resp.Header.Revision, "")
			case errors.As(err, &stale):
				emit("refused", unit, term.Token(), 0, err.Error())
			default:
				emit("failed", unit, term.Token(), 0, err.Error())
			}
		}
	}))
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err = m.Start(ctx)
	if os.Getenv(pausedDeafEnv) == "true" {
		// controller-runtime skips the graceful shutdown when the
		// election is lost: the process would end the deaf units.
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
		}
	}
	emit("exit", 0, 0, 0, fmt.Sprint(err))
	return 0
}
