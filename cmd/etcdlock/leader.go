package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/election"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

type leaderOptions struct{ watch bool }

// leaderView is shaped as status's JSON: the leader is the holder, null
// when there is none.
type leaderView struct {
	Name   string         `json:"name"`
	Holder *contenderView `json:"holder"`
}

func newLeaderCommand(g *globalOptions) *cobra.Command {
	o := &leaderOptions{}
	cmd := &cobra.Command{
		Use:   "leader NAME",
		Short: "Print the current leader (holder) of NAME",
		Long: `Print the identity and token of NAME's current leader, or "none". With
--watch, print again on every change until interrupted (changes are learned by
watch, not by polling), or until a change cannot be written (its reader gone:
exit 1 at the next change). The first line comes within --request-timeout, or
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

func runLeader(ctx context.Context, g *globalOptions, o *leaderOptions, name string) error {
	if err := lock.ValidateName(name); err != nil {
		return usageErr("%v", err)
	}
	if !o.watch {
		var l election.Leader
		err := g.read(ctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
			l, err = election.GetLeader(ctx, cli, name, lock.WithPrefix(g.prefix))
			return err
		})
		if err != nil {
			return err
		}
		return printLeader(g, name, l)
	}
	cli, err := g.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	// An interrupted watch ends quietly, exit 0; a single read dies of the
	// signal, as status does.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	leaders, err := election.Observe(ctx, cli, name, lock.WithPrefix(g.prefix))
	if err != nil {
		return err
	}
	// The first state, as without --watch, comes within --request-timeout
	// or the watch fails as an unreachable etcd; then the watch waits for
	// changes however long etcd is away.
	rctx, cancel := g.requestCtx(ctx)
	select {
	case l, ok := <-leaders:
		cancel()
		if !ok {
			return nil // interrupted
		}
		if err := printLeader(g, name, l); err != nil {
			return err
		}
	case <-rctx.Done():
		cancel()
		if ctx.Err() != nil {
			return nil // interrupted
		}
		return fmt.Errorf("lock: observe %q: %w", name, context.DeadlineExceeded)
	}
	for l := range leaders { // closed when ctx ends (interrupted)
		if err := printLeader(g, name, l); err != nil {
			return err // nobody reads the changes any more
		}
	}
	return nil
}

func printLeader(g *globalOptions, name string, l election.Leader) error {
	v := leaderView{Name: name}
	if l.Token != 0 {
		v.Holder = &contenderView{Owner: l.Identity, Token: l.Token, Since: since(l.Since), Key: l.Key}
	}
	return g.printer.Print(v, func(w io.Writer) {
		if v.Holder == nil {
			fmt.Fprintln(w, "none")
			return
		}
		fmt.Fprintf(w, "%s (token %s, since %s)\n", printable(v.Holder.Owner), v.Holder.Token, v.Holder.Since)
	})
}
