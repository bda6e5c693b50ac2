package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

type leaderOptions struct{ watch bool }

func newLeaderCommand(g *globalOptions) *cobra.Command {
	o := &leaderOptions{}
	cmd := &cobra.Command{
		Use:   "leader NAME",
		Short: "Print the current leader (holder) of NAME",
		Long: `Print the identity and token of NAME's current leader, or "none". With
--watch, print again on every change until interrupted (changes are learned by
watch, not by polling), or until a change cannot be written (its reader gone:
exit 0 at the next change). The first line comes within --request-timeout, or
the command fails as etcd unreachable (exit 69); after it, the watch waits out
etcd's absences.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLeader(cmd.Context(), g, o, args[0])
		},
	}
	cmd.Flags().BoolVar(&o.watch, "watch", false, "follow leadership changes")
	return cmd
}

// runLeader prints name's leader, once or, with --watch, at every change.
func runLeader(ctx context.Context, g *globalOptions, o *leaderOptions, name string) error {
	if err := lock.ValidateName(name); err != nil {
		return usageErr("%v", err)
	}
	if o.watch {
		return watchLeader(ctx, g, name)
	}
	var v leaderView
	err := g.read(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		st, err := holders.Inspect(ctx, cli, g.prefix, name)
		v = leaderOf(ctx, cli, st)
		return err
	})
	if err != nil {
		return err
	}
	return printLeader(g, v)
}

// watchLeader prints name's leader, then again at every change until
// SIGINT or SIGTERM (exit 0) or until a change cannot be printed.
func watchLeader(ctx context.Context, g *globalOptions, name string) error {
	cli, err := g.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	// An interrupted watch ends quietly, exit 0; a single read dies of the
	// signal, as status does.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	leaders, followed := followLeader(ctx, cli, name, g.prefix)
	defer func() {
		stop()
		for range leaders { // until Follow has returned
		}
	}()
	// The first state, as without --watch, comes within --request-timeout
	// or the watch fails as an unreachable etcd; then the watch waits for
	// changes however long etcd is away.
	rctx, cancel := g.requestCtx(ctx)
	select {
	case v, ok := <-leaders:
		cancel()
		if !ok {
			return <-followed // interrupted, or a bad name or prefix
		}
		if err := printLeader(g, v); err != nil {
			return err
		}
	case <-rctx.Done():
		cancel()
		if ctx.Err() != nil {
			return nil // interrupted
		}
		return fmt.Errorf("lock: observe %q: %w", name, context.DeadlineExceeded)
	}
	for v := range leaders { // closed when ctx ends (interrupted)
		if err := printLeader(g, v); err != nil {
			return err // nobody reads the changes any more
		}
	}
	return nil
}

// followLeader sends name's leader on leaders, and again whenever it
// changes, until ctx ends or Follow fails; then it sends Follow's error on
// followed and closes leaders. The caller ends ctx and reads leaders until
// it is closed.
func followLeader(ctx context.Context, cli *clientv3.Client, name, prefix string) (leaders <-chan leaderView, followed <-chan error) {
	lc := make(chan leaderView)
	fc := make(chan error, 1)
	go func() {
		defer close(lc)
		var last *leaderView
		fc <- holders.Follow(ctx, cli, prefix, name, func(st holders.Status) bool {
			v := leaderOf(ctx, cli, st)
			if last != nil && last.token() == v.token() {
				return true // another holder change than the leader's
			}
			select {
			case lc <- v:
				last = &v
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	return lc, fc
}

// leaderView is shaped as status's JSON: the leader is the holder, with
// the same fields, null when there is none.
type leaderView struct {
	Name   string         `json:"name"`
	Holder *contenderView `json:"holder"`
}

func (v leaderView) token() fencing.Token {
	if v.Holder == nil {
		return 0
	}
	return v.Holder.Token
}

// leaderOf is st's leader, its holder, with its lease's remaining TTL.
func leaderOf(ctx context.Context, cli *clientv3.Client, st holders.Status) leaderView {
	v := leaderView{Name: st.Name}
	if st.Holder != nil {
		h := holderView(ctx, cli, *st.Holder)
		v.Holder = &h
	}
	return v
}

func printLeader(g *globalOptions, v leaderView) error {
	return g.printer.Print(v, func(w io.Writer) {
		if v.Holder == nil {
			fmt.Fprintln(w, "none")
			return
		}
		fmt.Fprintf(w, "%s (token %s%s, lease %s, %ds left)\n", v.Holder.who(), v.Holder.Token, v.Holder.when(), v.Holder.Lease, v.Holder.LeaseTTL)
	})
}
