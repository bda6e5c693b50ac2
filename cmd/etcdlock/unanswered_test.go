package main

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// call runs a request through u's interceptor that ends with err once
// its end is released (close the returned channel), and returns a channel
// closed when the request has ended.
func call(u *unanswered, err error) (release chan struct{}, ended chan struct{}) {
	release, ended = make(chan struct{}), make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(ended)
		_ = u.intercept(context.Background(), "/etcdserverpb.KV/Txn", nil, nil, nil, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			close(sent)
			<-release
			return err
		})
	}()
	<-sent
	return release, ended
}

func TestUnansweredOrdersBySendNotEnd(t *testing.T) {
	noAnswer := status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	for _, c := range []struct {
		name  string
		first error // sent first, ends last
		then  error // sent second, ends first
		want  bool
	}{
		// A try a sick member held past its bound ends after a later
		// try, to another member, was answered: etcd answers.
		{"held try ends after a later answer", noAnswer, nil, false},
		// An answer to an earlier request, come late, says nothing of
		// the later one that got none.
		{"late answer to an earlier request", nil, noAnswer, true},
		{"both unanswered", noAnswer, status.Error(codes.Unavailable, "connection refused"), true},
		{"both answered, one with etcd's error", status.Error(codes.FailedPrecondition, "etcdserver: requested lease not found"), nil, false},
		// A request etcdlock canceled says nothing.
		{"canceled after an unanswered one", noAnswer, status.Error(codes.Canceled, "context canceled"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var u unanswered
			r1, e1 := call(&u, c.first)
			r2, e2 := call(&u, c.then)
			close(r2)
			<-e2
			close(r1)
			<-e1
			if got := u.Load(); got != c.want {
				t.Errorf("Load() = %v, want %v", got, c.want)
			}
		})
	}
}
