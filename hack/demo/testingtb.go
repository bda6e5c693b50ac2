package main

import (
	"fmt"
	"os"
	"testing"
)

// programTB lets this program use pkg/etcdtest's helpers, which take a
// testing.TB. It has the methods they and their zaptest logger call; any
// other would panic on the nil TB it embeds. Fatal panics with a fatal,
// which recoverFatal turns into run's error; cleanups run at cleanup.
type programTB struct {
	testing.TB
	cleanups []func()
}

type fatal struct{ err error }

func (*programTB) Helper() {}

func (t *programTB) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }

// Logf writes to stderr: etcdtest's proxy logs only its errors.
func (*programTB) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (*programTB) Fail() {}

func (*programTB) Fatal(args ...any) { panic(fatal{fmt.Errorf("%s", fmt.Sprint(args...))}) }

func (*programTB) Fatalf(format string, args ...any) { panic(fatal{fmt.Errorf(format, args...)}) }

// recoverFatal, deferred, sets *err to the error of a Fatal call.
func (*programTB) recoverFatal(err *error) {
	if r := recover(); r != nil {
		f, ok := r.(fatal)
		if !ok {
			panic(r)
		}
		*err = f.err
	}
}

// cleanup runs the functions given to Cleanup, last first.
func (t *programTB) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
