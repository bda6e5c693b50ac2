package main

import (
	"syscall"
	"time"

	"github.com/etcdlock/etcdlock/cmd/internal/guardian"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// supervisor watches one command that a guardian runs while a lock is
// held: the guardian's events, etcdlock's signals, the lock's loss, the
// run's time limit and the lease's deadlines, one method per event. Only
// the goroutine of superviseCommand touches it.
type supervisor struct {
	g       *globalOptions
	gd      *guardian.Guardian
	l       *lock.Lock
	s       *session
	o       *runOptions
	argv    []string
	killSig syscall.Signal
	fg      bool // the command has the terminal

	soft      time.Time       // the deadline the guardian was told last
	renewals  renewWarning    // notes on failing renewals
	forwarded bool            // a signal etcdlock received was forwarded to the command
	timedOut  bool            // --run-timeout stopped the command
	lostErr   error           // why the lock was lost, once it was
	lost      <-chan struct{} // l.Context().Done() until the loss is handled (the lock is released only after supervision)
	runOut    <-chan time.Time
	ack       <-chan time.Time // set while a stop waits for the guardian's acknowledgement
	asked     time.Time        // when that stop was sent
}

// result is how a supervised command ended: its exit status, the signal
// that killed it, or why etcdlock ends instead.
type result struct {
	code int
	sig  syscall.Signal
	err  error
}
