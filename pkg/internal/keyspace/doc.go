// Package keyspace is the layout of etcdlock's keys in etcd and the
// encoding of the record stored in them: every key a lock, a read-write
// lock, a semaphore, an AcquireAll set, a lock-delay or an election's term
// writes, reads or watches is built here, and every key Inspect, List and
// Break find is parsed here.
//
// Under a prefix ending in '/' (DefaultPrefix "/etcdlock/"), a name's keys
// are
//
//	<prefix><escaped name>/<lease, hex>                       a contender
//	<prefix><escaped name>%slot/<slot>                        a semaphore's slot
//	<prefix><escaped name>%held/<lease, hex>-<token, hex>     a lock-delay marker
//	<prefix><escaped name>%delay/<revision, hex>-<seconds>    a lock-delay timer
//	<prefix><escaped name>%delayed/<revision, hex>-<seconds>  the timer's started record
//	<prefix><escaped name>%tenure/<lease, hex>-<token, hex>   an election term's tenure key
//
// A name is escaped ('%' as %25, '/' as %2F), so no name's range contains
// another's and no escaped name ends in a %segment. The format is on the
// wire: keys written by earlier releases must keep their meaning.
package keyspace
