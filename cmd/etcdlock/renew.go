package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/etcdlock/etcdlock/pkg/detached"
)

func newRenewCommand(g *globalOptions) *cobra.Command {
	o := &grantOptions{}
	cmd := &cobra.Command{
		Use:   "renew NAME --owner OWNER --token TOKEN",
		Short: "Renew a script's lock before its deadline",
		Long: `Refresh the lease of the lock that OWNER holds on NAME with TOKEN, and print
the new deadline (same format as acquire). The TTL is the one given to acquire:
etcd cannot change a lease's TTL.

Fails with exit 79 if that lock no longer exists (it expired or was released:
a renewal after expiry never revives it) or if TOKEN is not OWNER's holder.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return runRenew(cmd.Context(), g, o, args[0]) },
	}
	o.bind(cmd)
	return cmd
}

func runRenew(ctx context.Context, g *globalOptions, o *grantOptions, name string) error {
	tok, err := o.validate(name)
	if err != nil {
		return err
	}
	return g.detached(ctx, func(ctx context.Context, d *detached.Locks) error {
		gr, err := d.Renew(ctx, name, o.owner, tok)
		if err != nil {
			return fmt.Errorf("cannot renew: %w", err)
		}
		printGrant(g, gr)
		return nil
	})
}
