package main

import (
	"os"

	"github.com/etcdlock/etcdlock/cmd/internal/guardian"
)

// superviseCommand is never reached on Windows: parseSignal refuses first.
func superviseCommand(*supervisor, <-chan os.Signal) result {
	return result{err: usageErr("%s", guardian.Limits)}
}
