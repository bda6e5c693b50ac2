package fencing_test

import (
	"context"
	"database/sql"
	"io"
	"net/http"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/etcdfence"
	"github.com/etcdlock/etcdlock/fencing/httpfence"
	"github.com/etcdlock/etcdlock/fencing/sqlfence"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// The snippets of fencing/README.md, compiled (not run): TestReadmeSnippets
// in hack/snippets checks that each snippet's lines are in one of these
// functions, in order.

// inventoryStore stands in for a resource.
type inventoryStore struct{}

func (inventoryStore) Apply(string) error { return nil }

func Example_readmeGuard() {
	l, inventory, change := (*lock.Lock)(nil), inventoryStore{}, "-1 widget"
	var guard fencing.Guard // zero value ready; share it
	err := guard.Do("inventory", l.Token(), func() error {
		return inventory.Apply(change) // runs only if the token is not stale
	})
	_ = err
}

func Example_readmeEtcd() {
	ctx, cli, l, cfg := context.Background(), (*clientv3.Client)(nil), (*lock.Lock)(nil), "v2"
	_, err := etcdfence.Commit(ctx, cli, l.Key(), l.Token(),
		clientv3.OpPut("/config/active", cfg))
	_ = err
}

func Example_readmeSQL() {
	ctx, db, l, id := context.Background(), (*sql.DB)(nil), (*lock.Lock)(nil), 42
	err := sqlfence.WithFence(ctx, db, "orders", l.Token(), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE orders SET status = 'shipped' WHERE id = $1`, id)
		return err
	})
	_ = err
}

func Example_readmeHTTP() {
	ctx, l, guard, handler := context.Background(), (*lock.Lock)(nil), fencing.Guard{}, http.NotFoundHandler()
	url, body := "http://127.0.0.1:8080/config", io.Reader(nil)
	srv := httpfence.Middleware(&guard, nil, handler) // resource = URL path

	client := &http.Client{Transport: &httpfence.Transport{}}
	req, _ := http.NewRequestWithContext(fencing.NewContext(ctx, l.Token()), "PUT", url, body)
	resp, err := client.Do(req) // 409 if a newer owner has written
	_, _, _ = srv, resp, err
}
