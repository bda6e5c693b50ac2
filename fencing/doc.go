// Package fencing defines the fencing token that etcdlock hands to every lock
// holder, and (in later subpackages) the guards that make a protected resource
// reject writes carrying a stale token.
//
// A token is the etcd create revision of the owner's key. Successive owners of
// one lock name always receive strictly increasing tokens, so a resource that
// remembers the highest token it has accepted can refuse any write from an
// owner that has since been superseded — even one that still believes it holds
// the lock.
package fencing
