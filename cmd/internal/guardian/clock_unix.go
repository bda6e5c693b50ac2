//go:build linux || darwin || freebsd || openbsd || dragonfly

package guardian

import "golang.org/x/sys/unix"

const clockMonotonic = unix.CLOCK_MONOTONIC
