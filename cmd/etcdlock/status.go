package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

type statusView struct {
	Name    string          `json:"name"`
	Holder  *contenderView  `json:"holder"`
	Waiters []contenderView `json:"waiters"`
}

func newStatusCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status NAME",
		Short: "Show who holds NAME, its token and remaining lease TTL, and the waiters in order",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStatus(cmd.Context(), g, args[0])
		},
	}
}

func runStatus(ctx context.Context, g *globalOptions, name string) error {
	if err := lock.ValidateName(name); err != nil {
		return usageErr("%v", err)
	}
	v := statusView{Name: name, Waiters: []contenderView{}}
	var st lock.Status
	err := g.request(ctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		if st, err = lock.Inspect(ctx, cli, name, lock.WithPrefix(g.prefix)); err != nil {
			return err
		}
		if st.Holder != nil {
			h := viewOf(*st.Holder)
			if ttl, err := cli.TimeToLive(ctx, st.Holder.LeaseID); err == nil {
				h.LeaseTTL = ttl.TTL
			}
			v.Holder = &h
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, w := range st.Waiters {
		v.Waiters = append(v.Waiters, viewOf(w))
	}
	g.printer.Print(v, func(w io.Writer) {
		if v.Holder == nil {
			fmt.Fprintf(w, "%s: free\n", name)
			return
		}
		h := v.Holder
		fmt.Fprintf(w, "%s: held by %s (token %s%s, lease %s, %ds left)\n", name, h.who(), h.Token, h.when(), h.Lease, h.LeaseTTL)
		for i, c := range v.Waiters {
			fmt.Fprintf(w, "  waiter %d: %s (token %s%s)\n", i+1, c.who(), c.Token, c.when())
		}
	})
	return nil
}
