// Package embedded starts real etcd servers inside the current process: one
// member or an N-member cluster, listening only on 127.0.0.1 on free ports.
//
// It exists for the demo, for tests and for `etcdlock dev`. It is the real
// etcd server (go.etcd.io/etcd/server/v3/embed), not a mock: leases expire,
// revisions increase and members can be stopped, hard-stopped and restarted
// with their data intact.
//
// Logging is quiet (zap.NewNop) unless a logger is injected with WithLogger.
package embedded
