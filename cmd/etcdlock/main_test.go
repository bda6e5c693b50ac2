package main

import (
	"os"
	"runtime"
	"testing"

	"go.uber.org/goleak"
)

// TestMain undoes package oneproc: tests run commands in the test's own
// process, with the default GOMAXPROCS.
func TestMain(m *testing.M) {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.SetDefaultGOMAXPROCS()
	}
	goleak.VerifyTestMain(m)
}
