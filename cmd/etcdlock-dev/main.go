// Command etcdlock-dev runs a single-member etcd for local development; it
// is what `etcdlock dev` runs. It is a separate binary so that the etcd
// server's code and start-up cost stay out of the etcdlock command that
// wraps every cron job (see the README, "Performance").
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
	"github.com/etcdlock/etcdlock/cmd/internal/logging"
	"github.com/etcdlock/etcdlock/pkg/embedded"
)

type options struct {
	dataDir  string
	listen   string
	logLevel string
}

func main() {
	o := &options{}
	code := 0
	cmd := &cobra.Command{
		Use:   "etcdlock-dev [--data-dir D] [--listen 127.0.0.1:2379]",
		Short: "Run a single-member etcd for local development",
		Long: `Start a real etcd server (embedded, single member) listening on --listen, print
its endpoint, and serve until SIGINT or SIGTERM. Without --data-dir the data
lives in a temporary directory removed on exit. Only loopback addresses are
accepted: this is a development server. Also available as 'etcdlock dev'.`,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := run(cmd.Context(), o)
			if err != nil {
				code = exitcode.Config
			}
			return err
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { code = exitcode.Usage; return err })
	cmd.Flags().StringVar(&o.dataDir, "data-dir", "", "keep etcd's data here (default: a temporary directory)")
	cmd.Flags().StringVar(&o.listen, "listen", "127.0.0.1:2379", "client address (loopback only)")
	cmd.Flags().StringVar(&o.logLevel, "log-level", "error", "etcd's log level on stderr: debug, info, warn, error")
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
	lg, err := logging.New(o.logLevel)
	if err != nil {
		return fmt.Errorf("--log-level %q: %w", o.logLevel, err)
	}
	opts := []embedded.Option{embedded.WithClientAddr(o.listen), embedded.WithLogger(lg)}
	if o.dataDir != "" {
		if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
			return fmt.Errorf("--data-dir: %w", err)
		}
		opts = append(opts, embedded.WithDir(o.dataDir))
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
	fmt.Fprintf(os.Stderr, "etcdlock dev: etcd serving on %s; stop with Ctrl-C\n", c.Endpoints()[0])
	select {
	case <-ctx.Done():
	case err := <-c.Member(0).Etcd().Err():
		return errors.Join(errors.New("etcd stopped"), err)
	}
	fmt.Fprintln(os.Stderr, "etcdlock dev: stopping etcd")
	return nil
}
