// Command etcdlock-dev runs a single-member etcd for local development; it
// is what `etcdlock dev` runs. It is a separate binary so that the etcd
// server's code and start-up cost stay out of the etcdlock command that
// wraps every cron job (see hack/README.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/etcdlock/etcdlock/cmd/internal/devflags"
	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
	"github.com/etcdlock/etcdlock/cmd/internal/logging"
	"github.com/etcdlock/etcdlock/pkg/embedded"
)

type options struct {
	devflags.Options
	// One member of a cluster that --members starts (hidden flags).
	memberName, initialCluster, clusterToken string
}

// devLong is the command's help text.
const devLong = `Start a real etcd server (embedded, single member) listening on --listen, print
its endpoint, and serve until SIGINT or SIGTERM. Without --data-dir the data
lives in a temporary directory removed on exit. Only loopback addresses are
accepted: this is a development server. Also available as 'etcdlock dev'.

With --members N (N > 1), start N member processes forming one cluster, each
on free loopback ports with etcd's production settings (fsync on, 100 ms
heartbeat, 1 s election timeout). The first line printed lists the client
URLs, comma-separated; then one line per member: name, pid, client URL.
Kill a member's pid to try failover: the others serve on while a majority
runs; the member is not restarted. With --data-dir, the cluster's peer
and client ports are recorded there (file "cluster"): the same command
restarts it on its data, on the same endpoints, and needs those ports
free; it waits, up to 20 s and saying so, for members of an earlier run
that are still stopping (their parent was killed).`

func main() {
	o := &options{}
	code := 0
	cmd := &cobra.Command{
		Use:   "etcdlock-dev [--data-dir D] [--listen 127.0.0.1:2379 | --members N]",
		Short: "Run an etcd for local development: one member, or a cluster of member processes",
		Long:  devLong,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				code = exitcode.Usage
				return err
			}
			return nil
		},
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Check(cmd.Flags()); err != nil {
				code = exitcode.Usage
				return err
			}
			if o.Members > 1 && o.memberName != "" {
				code = exitcode.Usage
				return errors.New("--members and --member-name exclude each other")
			}
			err := run(cmd.Context(), o)
			if err != nil {
				code = exitcode.Config
			}
			return err
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { code = exitcode.Usage; return err })
	o.Bind(cmd.Flags())
	cmd.Flags().StringVar(&o.memberName, "member-name", "", "serve this member of --initial-cluster (used by --members)")
	cmd.Flags().StringVar(&o.initialCluster, "initial-cluster", "", "name=peerURL,... (used by --members)")
	cmd.Flags().StringVar(&o.clusterToken, "cluster-token", "", "initial cluster token (used by --members)")
	for _, f := range []string{"member-name", "initial-cluster", "cluster-token"} {
		_ = cmd.Flags().MarkHidden(f)
	}
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "etcdlock dev: error:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func run(ctx context.Context, o *options) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	lg, err := logging.New(o.LogLevel, os.Stderr)
	if err != nil {
		return fmt.Errorf("--log-level %q: %w", o.LogLevel, err)
	}
	lg = withoutStopNoise(lg)
	switch {
	case o.Members > 1:
		return runCluster(ctx, o)
	}
	opts := []embedded.Option{embedded.WithClientAddr(o.Listen), embedded.WithLogger(lg)}
	if o.memberName != "" {
		if o.DataDir == "" {
			return errors.New("--member-name needs --data-dir")
		}
		opts = append(opts, embedded.WithMemberOf(o.memberName, o.initialCluster, o.clusterToken))
	}
	if o.DataDir != "" {
		if o.memberName == "" {
			if err := notClusterData(o.DataDir); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
			return fmt.Errorf("--data-dir: %w", err)
		}
		lock, err := lockDataDir(o.DataDir, o.memberName)
		if err != nil {
			return err
		}
		defer lock.Close() // a file kept open, not merely unused: its finalizer would unlock it
		opts = append(opts, embedded.WithDir(o.DataDir))
	}
	c, err := embedded.Start(ctx, opts...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("cannot start etcd: %w", err)
	}
	defer c.Close()
	fmt.Println(c.Endpoints()[0])
	if o.memberName == "" {
		fmt.Fprintf(os.Stderr, "etcdlock dev: etcd serving on %s; stop with Ctrl-C\n", c.Endpoints()[0])
	}
	select {
	case <-ctx.Done():
	case err := <-c.Member(0).Etcd().Err():
		return errors.Join(errors.New("etcd stopped"), err)
	}
	fmt.Fprintln(os.Stderr, "etcdlock dev: stopping etcd")
	return nil
}
