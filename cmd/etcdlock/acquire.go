package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

type acquireOptions struct {
	owner string
	ttl   time.Duration
}

func newAcquireCommand(g *globalOptions) *cobra.Command {
	o := &acquireOptions{}
	cmd := &cobra.Command{
		Use:   "acquire NAME --owner OWNER [--ttl D]",
		Short: "Take a lock for a script, with a lease nobody renews for you",
		Long: `Take NAME if it is free, with a fresh lease of --ttl that etcdlock does not
renew: the script must call 'etcdlock renew' before the deadline, and
'etcdlock release' when done. Prints the grant as shell assignments
(ETCDLOCK_TOKEN=..., ETCDLOCK_KEY=..., ETCDLOCK_LEASE=..., ETCDLOCK_DEADLINE=...)
or JSON with -w json.

If NAME is held by someone else, exits 75 naming the holder. If NAME is already
held under the same --owner (an earlier acquire whose output was lost, or whose
release failed), that grant is replaced by a new one with a new token: the
earlier token no longer renews or releases anything. So --owner must be unique
to each run that may overlap another (add $$ or a run ID).`,
		Example: `  eval "$(etcdlock acquire nightly --owner "cron@$(hostname)" --ttl 60s)"
  do_work --fencing-token "$ETCDLOCK_TOKEN"
  etcdlock renew nightly --owner "cron@$(hostname)" --token "$ETCDLOCK_TOKEN"
  etcdlock release nightly --owner "cron@$(hostname)" --token "$ETCDLOCK_TOKEN"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runAcquire(cmd.Context(), g, o, args[0]) },
	}
	cmd.Flags().StringVar(&o.owner, "owner", "", "owner identity; renew and release must give the same (required)")
	cmd.Flags().DurationVar(&o.ttl, "ttl", 60*time.Second, "lease TTL (whole seconds; etcd raises it to its minimum)")
	return cmd
}

func runAcquire(ctx context.Context, g *globalOptions, o *acquireOptions, name string) error {
	if err := scriptArgs(name, o.owner); err != nil {
		return err
	}
	if err := lock.ValidateTTL(o.ttl); err != nil {
		return usageErr("--ttl: %w", err)
	}
	return g.detached(ctx, func(ctx context.Context, d *lock.Detached) error {
		gr, err := d.Acquire(ctx, name, o.owner, o.ttl)
		if err != nil {
			return err
		}
		printGrant(g, gr)
		return nil
	})
}
