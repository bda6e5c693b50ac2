package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

type statusView struct {
	Name    string          `json:"name"`
	Holder  *contenderView  `json:"holder"`  // the oldest holder
	Holders []contenderView `json:"holders"` // every holder: readers share a name, a semaphore has up to its limit
	Waiters []contenderView `json:"waiters"`
}

func newStatusCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status NAME",
		Short: "Show who holds NAME, its token and remaining lease TTL, and the waiters in order",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStatus(cmd.Context(), g, args[0])
		},
	}
}

func runStatus(ctx context.Context, g *globalOptions, name string) error {
	if err := lock.ValidateName(name); err != nil {
		return usageErr("%v", err)
	}
	v := statusView{Name: name}
	var st holders.Status
	err := g.read(ctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		if st, err = holders.Inspect(ctx, cli, g.prefix, name); err != nil {
			return err
		}
		v.Holders = make([]contenderView, len(st.Holders))
		for i, c := range st.Holders {
			v.Holders[i] = holderView(ctx, cli, c)
		}
		if len(v.Holders) > 0 {
			v.Holder = &v.Holders[0]
		}
		return nil
	})
	if err != nil {
		return err
	}
	v.Waiters = viewsOf(st.Waiters)
	g.printer.Print(v, func(w io.Writer) {
		name := printable(name)
		h := v.Holder
		switch {
		case h == nil && len(v.Waiters) == 0:
			fmt.Fprintf(w, "%s: free\n", name)
			return
		case h == nil:
			// The first waiter is a set of names that waits for another
			// of its names: it holds none, but comes first here.
			fmt.Fprintf(w, "%s: not held, %s queued (the first waits for another name of its set)\n", name, plural(len(v.Waiters), "waiter"))
		case len(v.Holders) == 1 && !h.Shared && h.Slot == nil:
			fmt.Fprintf(w, "%s: held by %s (token %s%s, lease %s, %ds left)\n", name, h.who(), h.Token, h.when(), h.Lease, h.LeaseTTL)
		default:
			fmt.Fprintf(w, "%s: held by %s\n", name, heldBy(v.Holders))
			for _, h := range v.Holders {
				fmt.Fprintf(w, "  %s: %s (token %s%s, lease %s, %ds left)\n", h.role(), h.who(), h.Token, h.when(), h.Lease, h.LeaseTTL)
			}
		}
		for i, c := range v.Waiters {
			fmt.Fprintf(w, "  waiter %d: %s (token %s%s)\n", i+1, c.who(), c.Token, c.when())
		}
	})
	return nil
}

// heldBy counts the holders of a read-write lock or a semaphore.
func heldBy(holders []contenderView) string {
	if h := holders[0]; h.Slot != nil {
		return fmt.Sprintf("%d of %d slots", len(holders), h.Limit)
	}
	return plural(len(holders), "reader")
}
