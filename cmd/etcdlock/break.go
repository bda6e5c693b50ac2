package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

type breakOptions struct{ token string }

func newBreakCommand(g *globalOptions) *cobra.Command {
	o := &breakOptions{}
	cmd := &cobra.Command{
		Use:   "break NAME --token TOKEN",
		Short: "Forcibly free a lock held by a stuck holder (admin)",
		Long: `Delete the holder's key of NAME and revoke its lease, but only if the holder's
token is still TOKEN (see 'etcdlock status'). Requiring the token means that
two operators cannot break a newer holder by accident. Revoking the lease ends
every lock held under it; a holder run by etcdlock kills its command at once.

Exits 79 if no holder of NAME has TOKEN any more.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return runBreak(cmd.Context(), g, o, args[0]) },
	}
	cmd.Flags().StringVar(&o.token, "token", "", "the holder's token, from 'etcdlock status' (required)")
	return cmd
}

func runBreak(ctx context.Context, g *globalOptions, o *breakOptions, name string) error {
	if err := lock.ValidateName(name); err != nil {
		return usageErr("%v", err)
	}
	tok, err := parseTokenFlag(o.token)
	if err != nil {
		return err
	}
	return g.request(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		h, err := lock.Break(ctx, cli, name, tok, lock.WithPrefix(g.prefix), lock.WithCleanupTimeout(g.requestTimeout))
		if err != nil {
			return err
		}
		v := viewOf(h)
		g.printer.Print(v, func(w io.Writer) {
			fmt.Fprintf(w, "broke %s: holder %s (token %s), lease %s revoked\n", printable(name), v.who(), v.Token, v.Lease)
		})
		return nil
	})
}
