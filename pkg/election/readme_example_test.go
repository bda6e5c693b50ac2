package election_test

import (
	"context"
	"log"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/election"
	"github.com/etcdlock/etcdlock/pkg/election/electionmetrics"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// The new side of the snippet of pkg/election/README.md, compiled (not
// run): TestReadmeSnippets in hack/snippets checks that its lines are
// here, in order.
func Example_readme() {
	ctx, etcd, id := context.Background(), (*clientv3.Client)(nil), "replica-1"
	run := func(context.Context, any) {}
	metrics, err := electionmetrics.New(prometheus.DefaultRegisterer, "my-controller") // optional
	if err != nil {
		log.Fatal(err)
	}
	e, err := election.New(election.Config{
		Client:          etcd, // *clientv3.Client
		Name:            "my-controller",
		ReleaseOnCancel: true,
		Metrics:         metrics,
		Callbacks: election.Callbacks{
			OnStartedLeading: func(ctx context.Context, term election.Term) { run(ctx, term.Token) },
			OnStoppedLeading: func() { log.Print("stopped leading") },
			OnNewLeader:      func(id string) { log.Print("leader: ", id) },
		},
	}, lock.WithOwner(id), lock.WithTTL(15*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/healthz", e) // 503 while leading past the deadline
	e.Run(ctx)
}
