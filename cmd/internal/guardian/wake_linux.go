package guardian

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// wakeTimer continues the guardian at the times its loop waits for, even
// if it is stopped then: a kernel timer that sends it SIGCONT, which wakes
// a stopped process whoever sends it (the first process of a PID
// namespace included). A guardian stopped together with etcdlock (SIGSTOP
// of both, a stopped job's whole group) still stops the command at its
// deadline. Without the timer (timer_create refused), it does nothing.
type wakeTimer struct {
	id int32
	ok bool
}

// sigevent is struct sigevent of SIGEV_SIGNAL: the value, the signal and
// the notification, padded to the kernel's 64 bytes.
type sigevent struct {
	value  uintptr
	signo  int32
	notify int32
	_      [64 - 8 - unsafe.Sizeof(uintptr(0))]byte
}

const sigevSignal = 0 // SIGEV_SIGNAL: the signal, to the process

// noWake, set only by a test's guardian, leaves the timer out.
var noWake bool

func newWakeTimer() wakeTimer {
	if noWake {
		return wakeTimer{}
	}
	ev := sigevent{signo: int32(syscall.SIGCONT), notify: sigevSignal}
	var w wakeTimer
	_, _, e := unix.Syscall(unix.SYS_TIMER_CREATE, clockMonotonic, uintptr(unsafe.Pointer(&ev)), uintptr(unsafe.Pointer(&w.id)))
	w.ok = e == 0
	return w
}

// at sets the timer to mono, a CLOCK_MONOTONIC reading, replacing the
// time it was set to.
func (w wakeTimer) at(mono int64) {
	if !w.ok {
		return
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(mono, 1))}
	const timerAbstime = 1
	_, _, _ = unix.Syscall6(unix.SYS_TIMER_SETTIME, uintptr(w.id), timerAbstime, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
}
