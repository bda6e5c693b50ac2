//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDataDir takes an exclusive lock on a file in dir for member ("" for
// a single member), held until the returned file is closed, or fails at
// once if another etcdlock dev holds it: etcd itself would wait for the
// data files' locks without a word, deaf to SIGINT and SIGTERM.
func lockDataDir(dir, member string) (*os.File, error) {
	path := filepath.Join(dir, ".etcdlock-dev"+member+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("--data-dir %s %w", dir, errInUse)
		}
		return nil, fmt.Errorf("--data-dir: lock %s: %w", path, err)
	}
	return f, nil
}
