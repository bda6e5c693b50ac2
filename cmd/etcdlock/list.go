package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/holders"
)

// listView is one name of `list`: status's fields but the lease's time
// left, which would cost a request per holder.
type listView struct {
	Name    string          `json:"name"`
	Holder  *contenderView  `json:"holder"`  // the oldest holder
	Holders []contenderView `json:"holders"` // readers and semaphore holders each
	Waiters []contenderView `json:"waiters"`
}

func newListCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list [NAME-PREFIX]",
		Short: "List locks (optionally those whose name starts with NAME-PREFIX)",
		Args:  usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p string
			if len(args) == 1 {
				p = args[0]
			}
			return runList(cmd.Context(), g, p)
		},
	}
}

func runList(ctx context.Context, g *globalOptions, namePrefix string) error {
	var all []holders.Status
	err := g.read(ctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		all, err = holders.List(ctx, cli, g.prefix, namePrefix)
		return err
	})
	if err != nil {
		return err
	}
	views := make([]listView, 0, len(all))
	for _, st := range all {
		v := listView{Name: st.Name, Holders: viewsOf(st.Holders), Waiters: viewsOf(st.Waiters)}
		if st.Holder != nil {
			h := viewOf(*st.Holder)
			v.Holder = &h
		}
		views = append(views, v)
	}
	g.printer.Print(views, func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tHOLDER\tTOKEN\tSINCE\tWAITERS")
		for _, v := range views {
			if v.Holder == nil {
				if len(v.Waiters) > 0 {
					// A set of names waiting for another of its names
					// heads this one's queue, as status shows.
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", printable(v.Name), "(none: queued)", "-", "-", len(v.Waiters))
				}
				continue
			}
			owner, since := printable(v.Holder.Owner), v.Holder.Since
			if v.Holder.Foreign {
				owner, since = "(no etcdlock record: etcdctl lock?)", "-"
			}
			if len(v.Holders) > 1 {
				owner += fmt.Sprintf(" (+%d more)", len(v.Holders)-1)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", printable(v.Name), owner, v.Holder.Token, since, len(v.Waiters))
		}
		tw.Flush()
	})
	return nil
}
