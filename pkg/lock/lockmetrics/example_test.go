package lockmetrics_test

import (
	"context"
	"log"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/lock"
	"github.com/etcdlock/etcdlock/pkg/lock/lockmetrics"
)

// A session's metrics on the default registry; one Recorder may serve
// every session of the process.
func ExampleNew() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	m, err := lockmetrics.New(prometheus.DefaultRegisterer, nil)
	if err != nil {
		log.Fatal(err)
	}
	s, err := lock.NewSession(ctx, cli, lock.WithMetrics(m))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(context.Background())
}
