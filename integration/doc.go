// Package integration holds end-to-end tests of etcdlock against real,
// embedded etcd servers: the lock scenarios every client must survive, with
// network faults injected by a TCP proxy between client and server.
package integration
