package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

type breakOptions struct {
	token string
	wait  time.Duration
	force bool
}

func newBreakCommand(g *globalOptions) *cobra.Command {
	o := &breakOptions{}
	cmd := &cobra.Command{
		Use:   "break NAME --token TOKEN",
		Short: "Make the holder of a lock release it (admin)",
		Long: `Ask the holder of NAME whose token is TOKEN (see 'etcdlock status') to release
it, and wait until it has. Requiring the token means that two operators cannot
break a newer holder by accident. A holder run by etcdlock stops its command
(--kill-signal, SIGKILL after --kill-grace cut to half its TTL), waits until
every process of it is gone, and releases: the next holder's command never
starts beside the broken one's. A library holder's lock is lost
(ErrBreakRequested) and it releases when its work has stopped.

A holder that is cut off from etcd or frozen cannot answer: its lease expires
within its TTL, after it stopped its command at its deadline. One that keeps
renewing without releasing by the end of --wait is fenced:
its lease is revoked, so it stops at its deadline, and its keys stay on a
lease of the same TTL, so that nobody else starts before then. A holder that no
session watches (etcdctl lock, etcdlock acquire) is fenced at once.

--force deletes the key and revokes the lease at once, as an etcd delete would:
the next holder may start while the broken one is still stopping.

Exits 79 if no holder of NAME has TOKEN any more.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return runBreak(cmd.Context(), g, o, args[0]) },
	}
	cmd.Flags().StringVar(&o.token, "token", "", "the holder's token, from 'etcdlock status' (required)")
	secondsVar(cmd.Flags(), &o.wait, "wait", holders.DefaultBreakWait, "how long to wait for the holder to release before fencing it, in seconds or as a duration")
	cmd.Flags().BoolVar(&o.force, "force", false, "delete the key and revoke the lease at once, without asking the holder: its command may still run when the next holder's starts")
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
	if o.wait <= 0 {
		return usageErr("--wait must be positive")
	}
	// The wait is Break's to bound, not the request timeout's.
	return g.requestFor(ctx, 2*g.requestTimeout+o.wait, func(ctx context.Context, cli *clientv3.Client) error {
		var h holders.Contender
		var released bool
		if o.force {
			h, err = holders.Force(ctx, cli, g.prefix, name, tok)
		} else {
			h, released, err = holders.Break(ctx, cli, g.prefix, name, tok, o.wait)
		}
		if err != nil {
			return err
		}
		v := viewOf(h)
		how := "let go of it: its key is gone (released, or its lease expired)"
		switch {
		case o.force:
			how = fmt.Sprintf("removed: key deleted and lease %s revoked", v.Lease)
		case !released:
			how = fmt.Sprintf("fenced: it did not release it, lease %s is revoked, and the name stays taken until it releases or its TTL passes once more", v.Lease)
		}
		g.printer.Print(v, func(w io.Writer) {
			fmt.Fprintf(w, "broke %s: holder %s (token %s) %s\n", printable(name), v.who(), v.Token, how)
		})
		return nil
	})
}
