package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/etcdlock/etcdlock/pkg/detached"
)

func newReleaseCommand(g *globalOptions) *cobra.Command {
	o := &grantOptions{}
	cmd := &cobra.Command{
		Use:   "release NAME --owner OWNER --token TOKEN",
		Short: "Release a script's lock",
		Long: `Delete the lock that OWNER holds on NAME with TOKEN (a compare-and-delete on
the token) and revoke its lease.

Safe to retry: if that lock no longer exists (released, expired, broken) the
result is success, and a newer holder's lock is never touched. Exits 79 if
TOKEN belongs to a lock of another owner.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return runRelease(cmd.Context(), g, o, args[0]) },
	}
	o.bind(cmd)
	return cmd
}

func runRelease(ctx context.Context, g *globalOptions, o *grantOptions, name string) error {
	tok, err := o.validate(name)
	if err != nil {
		return err
	}
	return g.detached(ctx, func(ctx context.Context, d *detached.Locks) error {
		if err := d.Release(ctx, name, o.owner, tok); err != nil {
			return fmt.Errorf("cannot release: %w", err)
		}
		return nil
	})
}
