// Package integration holds end-to-end tests of etcdlock against real,
// embedded etcd servers:
//
//   - the lock scenarios every client must survive (TestScenario*), with
//     network faults injected by a TCP proxy between client and server;
//   - the etcdlock CLI, driven through the built binary (TestCLI*);
//   - the fault suite (TestFaultSuite, and TestChaos for `make chaos`):
//     randomized partitions, pauses, lost replies, leader moves, member and
//     cluster crashes, with every history checked by porcupine and by
//     independent safety checks, and negative controls that must be caught;
//   - the session-reuse checker (TestReuseChecker, and TestReuseLong for
//     `make chaos`): seeded workloads of the public API as long-running
//     programs use it — sessions reused for many locks, quick cycles,
//     releases on expired contexts and their retries, an operator breaking
//     held keys, elections resigned on expired contexts — checked for
//     overlapping holders, late notices, reused or regressing tokens,
//     unexplained deletes, leaked goroutines and leftover keys;
//   - snapshot restore keeping tokens increasing.
//
// The helpers the suites share are in helpers_test.go, which also says
// where each suite's own harness is.
package integration
