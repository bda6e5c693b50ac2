// Package exitcode is the one table of the exit codes of the etcdlock
// commands (etcdlock and etcdlock-dev). `etcdlock help exit-codes` prints
// it, and a test checks that the CLI manual's table (cmd/etcdlock/README.md) says the same.
package exitcode

import (
	"fmt"
	"strings"
)

// Exit codes. Any other code of `run` or `elect` is the wrapped command's
// own (SignalBase+N when a signal N killed it).
const (
	OK            = 0
	Error         = 1   // any other failure
	Usage         = 64  // bad command line: unknown flag, missing argument, bad value
	Unavailable   = 69  // etcd could not be reached
	Internal      = 70  // the guardian of run/elect got no command from its supervisor
	NotAcquired   = 75  // the lock is held by someone else (--try, acquire)
	Mismatch      = 76  // run's --limit/--shared disagrees with the name's other contenders
	Permission    = 77  // etcd refused: authentication or RBAC
	Config        = 78  // configuration error: unreadable TLS files, bad certificates
	Lost          = 79  // the lock was lost, or renew/release/break's token does not hold it (see Table)
	LostWaiting   = 80  // run/elect's session was lost while it waited: the command never ran
	Timeout       = 124 // --timeout passed while waiting for the lock, or --run-timeout while the command ran
	CannotExecute = 126 // the command of run/elect could not be executed
	NotFound      = 127 // the command of run/elect was not found
	SignalBase    = 128 // plus N: signal N killed the command (or interrupted the wait)
)

// Row is one line of the table: the code as printed ("126, 127" for a
// pair) and its meaning, in Markdown (code spans in backquotes).
type Row struct {
	Code    string
	Meaning string
}

// Table lists every exit code in order, with the codes the wrapped command
// decides. It is built when asked for, not at start-up: the guardian
// links this package for its constants alone, and building the rows at
// every start cost it about 0.3 ms of CPU.
func Table() []Row {
	return []Row{
		{fmt.Sprint(OK), "success (`run`/`elect`: the command exited 0)"},
		{fmt.Sprint(Error), "other failure, among them a result that could not be written to stdout (a full device): what the command did stands (`renew` renewed, `break` broke), but `acquire` releases the grant it could not print. A pipe whose reader is gone (`\\| head`) is the reader's choice: exit 0 without a message, as the shell's own commands (but `acquire`: 1, the grant released)"},
		{fmt.Sprint(Usage), "usage error: unknown flag, missing or bad argument, bad TTL or token"},
		{fmt.Sprint(Unavailable), "etcd unreachable within `--request-timeout`, with the reason found by dialing it while the request waits (connection refused, unknown host, accepts connections but does not answer, answers but has no leader), or no answer in time; `status`, `list` and `leader` try again while etcd elects a leader, within the same timeout"},
		{fmt.Sprint(Internal), "internal error: the guardian process of `run`/`elect` got no command from `etcdlock`"},
		{fmt.Sprint(NotAcquired), "not acquired: held by someone else (`run --try`, `acquire`)"},
		{fmt.Sprint(Mismatch), "`run --limit N` or `--shared` disagrees with how the name's holders and waiters use it (another limit, a semaphore against a plain lock or a read-write lock, or the other way round); not changed by `-E`"},
		{fmt.Sprint(Permission), "permission denied by etcd (authentication, RBAC)"},
		{fmt.Sprint(Config), "configuration error: TLS files missing, unreadable or not PEM, bad certificate; TLS that does not match the server's (TLS to a plain server, plain to a TLS server, a certificate the CA does not verify); `dev`: a data directory it cannot use, in use, or holding another kind of cluster, or etcd that cannot start (a port taken); `run`/`elect --containment pid-namespace` where the system refuses a PID namespace"},
		{fmt.Sprint(Lost), "lock lost while the command ran, whatever the command's own exit status (the command was stopped, or had exited before the loss was seen: etcdlock confirms the lock with etcd once the command exits); " +
			"`renew`: the token's lock is gone (expired, released, broken), is another owner's or is not the holder; " +
			"`release`: the token is a lock of another owner (a lock already gone is a success); " +
			"`break`: no holder of the name has the token"},
		{fmt.Sprint(LostWaiting), "`run`/`elect`: the session was lost while waiting for the lock (etcd unreachable for longer than `--ttl`, or its lease revoked): the command never ran, a retry is safe"},
		{fmt.Sprint(Timeout), "timed out waiting (`--timeout`); `run`/`elect`: the command ran past `--run-timeout` and was stopped (not replaced by `-E`)"},
		{fmt.Sprintf("%d, %d", CannotExecute, NotFound), "the command could not be executed / was not found"},
		{fmt.Sprintf("N, %d+N", SignalBase), fmt.Sprintf("the command's own exit code; if SIGINT, SIGTERM or SIGHUP killed it, etcdlock dies of the same signal (as flock does, so that a shell stops the script); %d+N for another signal N", SignalBase)},
	}
}

// Help is the table as plain text, for `etcdlock help exit-codes`.
func Help() string {
	var b strings.Builder
	b.WriteString("Exit codes:\n\n")
	for _, r := range Table() {
		fmt.Fprintf(&b, "  %-9s %s\n", r.Code, strings.ReplaceAll(r.Meaning, "`", ""))
	}
	return b.String()
}

// Markdown is the table as the CLI manual prints it.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| code | meaning |\n|---|---|\n")
	for _, r := range Table() {
		fmt.Fprintf(&b, "| %s | %s |\n", r.Code, r.Meaning)
	}
	return b.String()
}
