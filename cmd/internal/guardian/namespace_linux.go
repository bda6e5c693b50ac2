package guardian

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// errNoNamespaces is spawnInNamespace's error where no way is left to try.
var errNoNamespaces = errors.New("no way to create one")

// namespaceAttrs are the ways to start the guardian as the first process
// of a new PID namespace, in the order tried: with a mount namespace of
// its own, for the namespace's /proc (enterNamespace); for root, without
// a user namespace first (root in a container may lack CAP_SYS_ADMIN and
// still be allowed a user namespace); for any other user, in a user
// namespace that maps only its own user and group, so that the command
// runs as the same user. There the guardian keeps CAP_SYS_ADMIN across its
// exec as an ambient capability, for the mount, and the command is started
// without it (startCall).
func namespaceAttrs() []*syscall.SysProcAttr {
	const pidMount = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
	uid, gid := os.Geteuid(), os.Getegid()
	user := &syscall.SysProcAttr{
		Cloneflags:  pidMount | syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		AmbientCaps: []uintptr{unix.CAP_SYS_ADMIN},
	}
	if uid == 0 {
		return []*syscall.SysProcAttr{{Cloneflags: pidMount}, user}
	}
	return []*syscall.SysProcAttr{user}
}

// setNamespace copies to a the namespace settings of ns, one of
// namespaceAttrs.
func setNamespace(a, ns *syscall.SysProcAttr) {
	a.Cloneflags = ns.Cloneflags
	a.UidMappings, a.GidMappings = ns.UidMappings, ns.GidMappings
	a.AmbientCaps = ns.AmbientCaps
}

// namespaceRefused reports whether err, from starting a process in new
// namespaces, says the system refused the namespaces (not allowed, too
// many, not built in) rather than that the binary cannot run.
func namespaceRefused(err error) bool {
	for _, e := range []error{unix.EPERM, unix.EINVAL, unix.ENOSPC, unix.EUSERS, unix.ENOSYS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// enterNamespace sets up the guardian's PID namespace, whose first
// process it is: a /proc of the namespace, mounted over the host's in the
// guardian's mount namespace only, so that the command's ps, pgrep and
// /proc/self agree with the pids it sees (getpid, $$, kill).
func enterNamespace() error {
	if err := unix.Mount("", "/proc", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make /proc private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	return nil
}

// handBack gives the terminal on the supervisor's stdin to the
// supervisor's process group: the guardian asks it to, because from its
// PID namespace it cannot name that group.
func (p *process) handBack() {
	if f, ok := p.stdin.(*os.File); ok {
		terminalCall(func() { _ = unix.IoctlSetPointerInt(int(f.Fd()), unix.TIOCSPGRP, unix.Getpgrp()) })
	}
}
