package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

type leaderOptions struct{ watch bool }

type leaderView struct {
	Name   string        `json:"name"`
	Leader string        `json:"leader,omitempty"`
	Token  fencing.Token `json:"token,omitempty"`
	Since  string        `json:"since,omitempty"`
}

func newLeaderCommand(g *globalOptions) *cobra.Command {
	o := &leaderOptions{}
	cmd := &cobra.Command{
		Use:   "leader NAME",
		Short: "Print the current leader (holder) of NAME",
		Long: `Print the identity and token of NAME's current leader, or "none". With
--watch, print again on every change until interrupted (changes are learned by
watch, not by polling).`,
		Args: cobra.ExactArgs(1),
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
	cli, err := g.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if !o.watch {
		rctx, cancel := g.requestCtx(ctx)
		defer cancel()
		st, err := lock.Inspect(rctx, cli, name, lock.WithPrefix(g.prefix))
		if err != nil {
			return err
		}
		printLeader(g, name, st.Holder)
		return nil
	}
	// pkg/election's Observe does the same; the CLI stays off that package
	// so that it does not link Prometheus (see README, Performance).
	var last fencing.Token = -1
	return lock.Follow(ctx, cli, name, func(st lock.Status) bool {
		var token fencing.Token
		if st.Holder != nil {
			token = st.Holder.Token
		}
		if token != last {
			last = token
			printLeader(g, name, st.Holder)
		}
		return true
	}, lock.WithPrefix(g.prefix))
}

func printLeader(g *globalOptions, name string, h *lock.Contender) {
	v := leaderView{Name: name}
	if h != nil {
		v.Leader, v.Token, v.Since = h.Owner, h.Token, since(h.Acquired)
	}
	g.printer.Print(v, func(w io.Writer) {
		if v.Token == 0 {
			fmt.Fprintln(w, "none")
			return
		}
		fmt.Fprintf(w, "%s (token %s, since %s)\n", v.Leader, v.Token, v.Since)
	})
}
