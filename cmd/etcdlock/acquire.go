package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlock/etcdlock/pkg/detached"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

type acquireOptions struct {
	owner    string
	ownerSet bool
	ttl      time.Duration
}

func newAcquireCommand(g *globalOptions) *cobra.Command {
	o := &acquireOptions{}
	cmd := &cobra.Command{
		Use:   "acquire NAME [--ttl D] [--owner OWNER]",
		Short: "Take a lock for a script, with a lease nobody renews for you",
		Long: `Take NAME if it is free, with a fresh lease of --ttl that etcdlock does not
renew: the script must call 'etcdlock renew' before the deadline, and
'etcdlock release' when done. Prints the grant as shell assignments
(ETCDLOCK_OWNER=..., ETCDLOCK_TOKEN=..., ETCDLOCK_KEY=..., ETCDLOCK_LEASE=...,
ETCDLOCK_DEADLINE=...) or JSON with -w json; renew and release take the
printed owner and token.

If NAME is held by someone else, exits 75 naming the holder. If the grant
cannot be written to stdout (a full device, a pipe whose reader is gone),
acquire releases it and exits 1: its caller never got the token. A closed
stdout is not one of those: Go's runtime opens /dev/null in its place.

The owner is new for every acquire (host:pid:random) unless --owner is given
on the command line (ETCDLOCK_OWNER in the environment is not used here).
Give --owner only with an identity unique to this run (a job's run ID), never a
shared one such as the host name: an acquire under the owner of an existing
grant takes it over — the grant is replaced by a new one with a new token, and
the earlier token no longer renews or releases anything. That is how a run
whose acquire output was lost (or whose release failed) gets the lock back with
its own run ID; two runs that share an owner would take the lock from each
other.`,
		Example: `  eval "$(etcdlock acquire nightly --ttl 60s)" || exit
  do_work --fencing-token "$ETCDLOCK_TOKEN"
  etcdlock renew nightly --owner "$ETCDLOCK_OWNER" --token "$ETCDLOCK_TOKEN"
  etcdlock release nightly --owner "$ETCDLOCK_OWNER" --token "$ETCDLOCK_TOKEN"

  # with a run ID of your own, so that a retry after a lost reply takes over:
  eval "$(etcdlock acquire nightly --owner "nightly-run-$RUN_ID")"`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ownerSet = cmd.Flags().Changed("owner")
			return runAcquire(cmd.Context(), g, o, args[0])
		},
	}
	cmd.Flags().StringVar(&o.owner, "owner", "", "owner identity unique to this run; an acquire under an existing grant's owner replaces that grant (default: new host:pid:random)")
	// Not from ETCDLOCK_OWNER: etcdlock run sets it for its command, and a
	// script that acquires twice under one owner would take the lock from
	// itself. acquire's owner is new unless the command line names it.
	_ = cmd.Flags().SetAnnotation("owner", noEnv, []string{"true"})
	secondsVar(cmd.Flags(), &o.ttl, "ttl", 60*time.Second, "lease TTL, in seconds or as a duration (whole seconds; etcd raises it to its minimum); nobody renews it but the script's renew, so longer than run's 10s, which etcdlock renews")
	return cmd
}

func runAcquire(ctx context.Context, g *globalOptions, o *acquireOptions, name string) error {
	owner := o.owner
	if !o.ownerSet {
		owner = detached.NewOwner()
	}
	if o.ownerSet && owner == "" {
		return usageErr("--owner is empty: name an owner, or leave the flag out for a new one")
	}
	if err := scriptArgs(name, owner); err != nil {
		return err
	}
	if err := lock.ValidateSessionOptions(lock.WithTTL(o.ttl)); err != nil {
		return usageErr("--ttl: %w", err)
	}
	return g.detached(ctx, func(ctx context.Context, d *detached.Locks) error {
		gr, err := d.Acquire(ctx, name, owner, o.ttl)
		if err != nil {
			return err
		}
		if err := printGrant(g, gr); err != nil {
			// Its token did not reach the caller, who cannot release or
			// renew the grant: give it back rather than leave the name
			// held for the TTL.
			rctx, cancel := g.requestCtx(context.WithoutCancel(ctx))
			defer cancel()
			if rerr := d.Release(rctx, gr.Name, gr.Owner, gr.Token); rerr != nil {
				return fmt.Errorf("%w; the grant (token %s) could not be released either, and ends with its TTL: %w", err, gr.Token, rerr)
			}
			return fmt.Errorf("%w; the grant is released", err)
		}
		return nil
	})
}
