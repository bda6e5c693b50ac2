package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/etcdlock/etcdlock/pkg/embedded"
)

type devOptions struct {
	dataDir string
	listen  string
}

func newDevCommand(g *globalOptions) *cobra.Command {
	o := &devOptions{}
	cmd := &cobra.Command{
		Use:   "dev [--data-dir D] [--listen 127.0.0.1:2379]",
		Short: "Run a single-member etcd for local development",
		Long: `Start a real etcd server (embedded, single member) listening on --listen, print
its endpoint, and serve until SIGINT or SIGTERM. Without --data-dir the data
lives in a temporary directory removed on exit. Only loopback addresses are
accepted: this is a development server.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDev(cmd.Context(), g, o) },
	}
	cmd.Flags().StringVar(&o.dataDir, "data-dir", "", "keep etcd's data here (default: a temporary directory)")
	cmd.Flags().StringVar(&o.listen, "listen", "127.0.0.1:2379", "client address (loopback only)")
	return cmd
}

func runDev(ctx context.Context, g *globalOptions, o *devOptions) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts := []embedded.Option{embedded.WithClientAddr(o.listen), embedded.WithLogger(g.logger.Named("etcd"))}
	if o.dataDir != "" {
		if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
			return withCode(exitConfig, fmt.Errorf("--data-dir: %w", err))
		}
		opts = append(opts, embedded.WithDir(o.dataDir))
	}
	c, err := embedded.Start(ctx, opts...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return withCode(exitUsage, fmt.Errorf("cannot start etcd: %w", err))
	}
	defer c.Close()
	ep := c.Endpoints()[0]
	g.printer.Print(map[string]string{"endpoint": ep}, func(w io.Writer) { fmt.Fprintln(w, ep) })
	g.printer.Note("etcd serving on %s; stop with Ctrl-C", ep)
	select {
	case <-ctx.Done():
	case err := <-c.Member(0).Etcd().Err():
		return fmt.Errorf("etcd stopped: %w", err)
	}
	g.printer.Note("stopping etcd")
	return nil
}
