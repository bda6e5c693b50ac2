//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os/signal"
	"path/filepath"
	"syscall"

	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/embedded"
)

// memberMain runs one member of a cluster of this module's etcd, embedded
// (the 3.7 server), until SIGTERM or SIGINT: what etcd's own binary does
// for the other releases, with the same, default, raft timing.
func memberMain(args []string) error {
	fs := flag.NewFlagSet("member", flag.ContinueOnError)
	name := fs.String("name", "", "the member's name in --initial-cluster")
	dir := fs.String("data-dir", "", "the member's data directory")
	client := fs.String("client", "", "client URL, http://127.0.0.1:PORT")
	initial := fs.String("initial-cluster", "", "name=peerURL,...")
	token := fs.String("token", "", "initial cluster token")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *name == "" || *dir == "" {
		return errors.New("usage: compat member --name N --data-dir D --client URL --initial-cluster C --token T")
	}
	u, err := url.Parse(*client)
	if err != nil {
		return fmt.Errorf("--client: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	lg, err := zap.NewProduction(zap.IncreaseLevel(zap.WarnLevel))
	if err != nil {
		return err
	}
	// embedded keeps a member's data in DIR/NAME.
	if filepath.Base(*dir) != *name {
		return fmt.Errorf("--data-dir %q must end in the member's name %q", *dir, *name)
	}
	c, err := embedded.Start(ctx,
		embedded.WithMemberOf(*name, *initial, *token), embedded.WithClientAddr(u.Host),
		embedded.WithDir(filepath.Dir(*dir)), embedded.WithLogger(lg))
	if err != nil {
		return err
	}
	defer c.Close()
	select {
	case <-ctx.Done():
		return nil
	case err := <-c.Member(0).Etcd().Err():
		return err
	}
}
