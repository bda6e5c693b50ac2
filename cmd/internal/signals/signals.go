// Package signals holds what etcdlock and its guardian do alike with
// signals: respect those their parent left ignored (as nohup does), and
// die of a signal the way a wrapper such as flock does.
package signals

import (
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// Notify is signal.Notify for those of sigs that are not ignored.
// signal.Notify would catch an ignored signal, and a caught signal
// is reset to its default action in every child: `nohup etcdlock run`
// would no longer protect the command. A signal ignored when the process
// started stays ignored, and children inherit that. (Go sees SIGHUP and
// SIGINT inherited as ignored; it catches the others from the start.)
func Notify(c chan<- os.Signal, sigs ...syscall.Signal) {
	for _, sig := range sigs {
		if !signal.Ignored(sig) {
			signal.Notify(c, sig)
		}
	}
}

// Reraised are the signals Reraise dies of: those that stop a job
// (Ctrl-C, kill, a hangup). A shell stops a script or loop only when a
// job died of SIGINT, not when it exited 130. Signals that dump core, and
// SIGKILL, are left to the exit code.
var Reraised = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// reraisable reports whether Reraise should die of sig.
func reraisable(sig syscall.Signal) bool {
	return slices.Contains(Reraised, sig) && !signal.Ignored(sig)
}
