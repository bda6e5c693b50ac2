package main

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// childEnv returns base with ours set, removing inherited values of the
// same names so that ours win.
func childEnv(base []string, ours map[string]string) []string {
	env := make([]string, 0, len(base)+len(ours))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := ours[k]; !ok {
			env = append(env, kv)
		}
	}
	for k, v := range ours {
		env = append(env, k+"="+v)
	}
	return env
}

// exitStatus is the shell convention: the exit code, or 128+N for signal N.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return exitcode.Error
}

// parseSignal accepts TERM, SIGTERM, term or a number.
func parseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, usageErr("--kill-signal %q: unknown signal", s)
}

func fieldsOf(l *lock.Lock) []zap.Field {
	return []zap.Field{zap.String("name", l.Name()), zap.Stringer("token", l.Token()), zap.String("key", l.Key())}
}
