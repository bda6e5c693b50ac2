//go:build !linux

package ctrlmanager_test

// asChild: the paused-leader test, which reads /proc, runs on Linux only.
func asChild() (int, bool) { return 0, false }
