// Package netfault is etcdlock's real-network fault harness: three etcd
// members and the clients in Linux network namespaces of their own, joined
// by veth pairs and a bridge, with faults injected by the kernel (nftables
// drops, SIGSTOP, SIGKILL) rather than by an in-process proxy. Its tests
// run only with NETFAULT=1, as root (make chaos-net); README.md says what
// they check and what they measured.
package netfault
