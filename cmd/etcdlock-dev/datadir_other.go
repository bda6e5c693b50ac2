//go:build !unix

package main

import "os"

// lockDataDir does nothing where there is no flock: a second etcdlock
// dev on a data directory in use waits for etcd's own locks.
func lockDataDir(dir, member string) (*os.File, error) { return nil, nil }
