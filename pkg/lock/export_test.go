package lock

import clientv3 "go.etcd.io/etcd/client/v3"

// ClientOf returns the etcd client s uses, for the package's external
// tests.
func ClientOf(s *Session) *clientv3.Client { return s.client }
