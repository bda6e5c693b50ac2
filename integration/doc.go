// Package integration holds end-to-end tests of etcdlock against real,
// embedded etcd servers:
//
//   - the lock scenarios every client must survive (TestScenario*), with
//     network faults injected by a TCP proxy between client and server;
//   - the etcdlock CLI, driven through the built binary (TestCLI*);
//   - the fault suite (TestFaultSuite*, and TestChaos for `make chaos`):
//     randomized partitions, pauses, lost replies, leader moves, member and
//     cluster crashes, with every history checked by porcupine and by
//     independent safety checks, and negative controls that must be caught;
//   - snapshot restore keeping tokens increasing.
package integration
