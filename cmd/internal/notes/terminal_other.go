//go:build !linux

package notes

// TerminalThread does nothing here: golang.org/x/sys/unix has no
// per-thread signal mask on these systems. (The guardian ignores SIGTTOU
// and SIGTTIN for its whole process on them instead.)
func TerminalThread() {}
