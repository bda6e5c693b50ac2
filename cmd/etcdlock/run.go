package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
	"github.com/etcdlock/etcdlock/cmd/internal/guardian"
	"github.com/etcdlock/etcdlock/cmd/internal/signals"
	"github.com/etcdlock/etcdlock/pkg/detached"
	pkglease "github.com/etcdlock/etcdlock/pkg/lease"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// runOptions are the flags of run and elect.
type runOptions struct {
	ttl        time.Duration
	owner      string
	timeout    time.Duration
	try        bool
	shell      bool
	killSignal string
	killGrace  time.Duration
	runTimeout time.Duration // --run-timeout; 0 for none
	limit      int           // run: --limit
	shared     bool          // run: --shared
	lockDelay  time.Duration // run: --lock-delay
	contain    string        // --containment
}

func (o *runOptions) bind(cmd *cobra.Command, try bool) {
	f := cmd.Flags()
	secondsVar(f, &o.ttl, "ttl", 10*time.Second, "lease TTL, in seconds or as a duration (whole seconds; etcd raises it to its minimum, about 2s); renewed every third of it, so it is how long a crashed holder keeps the lock: shorter than acquire's 60s, whose lease nobody renews")
	f.StringVar(&o.owner, "owner", "", "owner identity recorded in the lock (default host:pid:random)")
	secondsVar(f, &o.timeout, "timeout", 0, "give up waiting for holders after this long, in seconds (10) or as a duration (2m) (exit 124, or --conflict-exit-code); 0 waits forever. A free lock is taken however short it is; with --lock-delay or several names it bounds the whole acquisition")
	if try {
		f.BoolVar(&o.try, "try", false, "do not wait: exit 75 (or --conflict-exit-code) at once if the lock is held; silent with --quiet. One NAME only: several names are taken together, waiting (else exit 64)")
	}
	f.BoolVar(&o.shell, "shell", false, "run COMMAND with sh -c (COMMAND is then one string)")
	f.StringVar(&o.killSignal, "kill-signal", "TERM", "signal sent to the command's process group when the lock is lost")
	secondsVar(f, &o.killGrace, "kill-grace", 10*time.Second, "time between --kill-signal and SIGKILL; always cut so the command is dead before etcd could expire the lease (a cut is stated on stderr)")
	f.StringVar(&o.contain, "containment", "auto", "how the command's processes are held: pid-namespace (Linux: the kernel kills them all when the guardian dies, however it dies), process-tree (the guardian's descendants, as on the BSDs), or auto: pid-namespace where the system allows it, else process-tree with a note saying why")
	secondsVar(f, &o.runTimeout, "run-timeout", 0, "stop COMMAND once it has run this long, in seconds or as a duration, as a lost lock stops it (--kill-signal, SIGKILL after --kill-grace), then release and exit 124; 0: no limit")
}

// runLong is run's help text.
const runLong = `Acquire the lock NAME (waiting in FIFO order unless --try), run COMMAND in its
own process group while renewing the lease, then release the lock and exit with
COMMAND's exit code. If SIGINT, SIGTERM or SIGHUP killed COMMAND, etcdlock then
dies of the same signal, as flock does, so that a shell stops a script or a
list after Ctrl-C ($? is 128+N either way); another signal N gives exit 128+N.
A wait interrupted by one of these signals ends the same way.

COMMAND gets ETCDLOCK_NAME, ETCDLOCK_KEY, ETCDLOCK_TOKEN (the fencing token),
ETCDLOCK_OWNER and ETCDLOCK_DEADLINE (RFC 3339: the lease's deadline when
COMMAND started; renewals move the deadline on, the variable is not updated) in its environment; these
override inherited values. Pass ETCDLOCK_TOKEN with every write the command
makes to a fenced resource.

As with flock, "--" is optional: in 'etcdlock run [flags] NAME COMMAND
[ARGS...]' COMMAND's flags are its own. A command line with "--" is read the
explicit way: the first "--" ends the names ('run NAME [NAME...] [flags] --
COMMAND'), so several names need it, and so does a COMMAND whose arguments
hold a "--" ('run job -- git log -- file'). A name that starts with "-" goes
after a "--": 'run -- -job COMMAND', 'run -- -a -b -- COMMAND'.

With --limit N, NAME is a semaphore: up to N commands run at once, each in a
slot 0..N-1 given as ETCDLOCK_SLOT; ETCDLOCK_TOKEN then increases per slot, so
fence the slot's share of a resource with NAME and ETCDLOCK_SLOT as the key.
With --shared, NAME is a read-write lock: --shared runs share it, a run without
--shared holds it alone, in arrival order.

With --lock-delay D, a run that finds the previous holder of NAME ended
without releasing (it was killed and its lease expired, or it was broken)
waits D before it starts COMMAND, for that holder's writes still in flight; a
run that ends normally, is interrupted or whose COMMAND fails releases cleanly
and costs the next one nothing. Every run of NAME must give it.

With several NAMEs, run holds all of them at once or none (one token for the
set, written in one transaction, so runs with overlapping sets cannot
deadlock); ETCDLOCK_NAME is the first, ETCDLOCK_NAMES lists them all, one per
line. Several NAMEs take neither --try, --limit nor --shared.

COMMAND never outlives the lock. It runs below a guardian ("etcdlock
guardian" in ps: etcdlock-guardian if installed beside etcdlock, else
etcdlock itself, re-executed), by default (--containment auto) in a PID
namespace of which the guardian is pid 1 (on Linux; as another user than
root, through a user namespace that maps only that user), so that every
process COMMAND starts, including ones that call setsid or double-fork,
dies when the guardian dies, however it dies. The guardian stops them all:
  - when COMMAND exits: whatever it left running is stopped (and reported)
    before the lock is released;
  - when the lock is lost (the lease could not be renewed in time, its key
    was deleted) or etcdlock break asks: etcdlock then exits 79;
  - when etcdlock dies (kill -9, OOM killer): at once;
  - when etcdlock is frozen (SIGSTOP, a debugger), or both are: at the last
    lease deadline it was told (a kernel timer continues a stopped guardian).
If the guardian is killed, its namespace dies with it; if it does not
acknowledge a stop within a second (it is frozen or hung), etcdlock kills
it. In the namespace COMMAND cannot see or signal processes outside it,
and a setuid program (sudo) gains no privilege unless etcdlock runs as
root; --containment process-tree keeps COMMAND in etcdlock's process tree
instead (a child subreaper: etcdlock and its guardian each stop COMMAND if
the other dies, not if both do). Work handed to a daemon that was already
running (tmux new-session -d, systemd-run) is not COMMAND's and escapes by
design.
Stopping sends --kill-signal to every process and SIGKILL after --kill-grace,
the grace always cut so that SIGKILL goes out before etcd could expire the
lease and give the lock to someone else.

On a terminal, COMMAND's process group gets the terminal while it runs, so
that it reads input, Ctrl-C reaches it, and Ctrl-Z stops the job as without
etcdlock. A stopped job does not renew the lease: stopped for longer than the
lease's remaining time, COMMAND is stopped for good and the lock is lost.
SIGINT, SIGTERM and SIGHUP sent to etcdlock are forwarded to COMMAND's process
group; a signal etcdlock was started with ignored (SIGHUP under nohup, SIGINT
in a script's background job) stays ignored, by etcdlock and by COMMAND.`

// runExample is run's examples.
const runExample = `  # nightly job, at most one running across all hosts:
  etcdlock run nightly-report --ttl 30s -- /usr/local/bin/report --since yesterday

  # skip this run if another host is already doing it:
  etcdlock run --try backup -- ./backup.sh || [ $? -eq 75 ]

  # at most 4 transcoders at once, each told its slot:
  etcdlock run transcode --limit 4 -- ./transcode --worker "$ETCDLOCK_SLOT"

  # readers share the catalog, a rebuild holds it alone:
  etcdlock run catalog --shared -- ./report
  etcdlock run catalog -- ./rebuild-catalog

  # both databases, or neither (another run may list them the other way round):
  etcdlock run db-eu db-us -- ./migrate

  # a shell pipeline:
  etcdlock run deploy --shell -- 'make build && make deploy'`

func newRunCommand(g *globalOptions) *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:     "run [flags] NAME [NAME...] [--] COMMAND [ARGS...]",
		Short:   "Run a command while holding a lock",
		Long:    runLong,
		Example: runExample,
		Args:    commandArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			names, argv, _ := splitCommand(cmd, args)
			return runLocked(cmd.Context(), g, o, names, argv)
		},
	}
	o.bind(cmd, true)
	f := cmd.Flags()
	f.IntVar(&o.limit, "limit", 1, "semaphore: up to N holders at once, each in its own slot (ETCDLOCK_SLOT); every user of NAME must give the same N (else exit 76). One NAME only (else exit 64)")
	f.BoolVar(&o.shared, "shared", false, "read-write lock: hold NAME together with other --shared holders; a run without --shared is a writer and holds it alone; a semaphore's name refuses it (exit 76). One NAME only (else exit 64)")
	f.DurationVar(&o.lockDelay, "lock-delay", 0, "after a holder of NAME ended without releasing (killed, lease expired, broken), wait this long before running COMMAND; every run of NAME must give it. One NAME only (else exit 64)")
	return cmd
}

// acquireOptions are the lock options of run's --limit, --shared and
// --lock-delay.
func (o *runOptions) acquireOptions() []lock.AcquireOption {
	var opts []lock.AcquireOption
	if o.limit > 1 {
		opts = append(opts, lock.WithLimit(o.limit))
	}
	if o.shared {
		opts = append(opts, lock.WithShared())
	}
	if o.lockDelay > 0 {
		opts = append(opts, lock.WithLockDelay(o.lockDelay))
	}
	return opts
}

// validate checks the flags, and names and argv against them, before
// anything starts; it returns --kill-signal's signal.
func (o *runOptions) validate(names, argv []string) (syscall.Signal, error) {
	if err := lock.ValidateSessionOptions(lock.WithTTL(o.ttl)); err != nil {
		return 0, usageErr("--ttl: %w", err)
	}
	if o.timeout < 0 || o.killGrace < 0 || o.runTimeout < 0 {
		return 0, usageErr("--timeout, --run-timeout and --kill-grace must not be negative")
	}
	// The library's checks, before anything starts: each flag's range,
	// then what cannot be combined.
	for _, f := range []struct {
		flag string
		opt  lock.AcquireOption
	}{{"--limit", lock.WithLimit(o.limit)}, {"--lock-delay", lock.WithLockDelay(o.lockDelay)}} {
		if err := lock.ValidateAcquireOptions(f.opt); err != nil {
			return 0, usageErr("%s: %w", f.flag, err)
		}
	}
	if err := lock.ValidateAcquireOptions(o.acquireOptions()...); err != nil {
		return 0, usageErr("--limit, --shared and --lock-delay: %w", err)
	}
	sig, err := parseSignal(o.killSignal)
	if err != nil {
		return 0, err
	}
	if len(names) > 1 && (o.try || o.limit > 1 || o.shared || o.lockDelay > 0) {
		return 0, usageErr("several names take neither --try, --limit, --shared nor --lock-delay")
	}
	if o.shell && len(argv) != 1 {
		return 0, usageErr("--shell takes COMMAND as one string; quote it")
	}
	return sig, nil
}

// runLocked is run and elect: acquire names (one, or an AcquireAll set),
// supervise the command, release.
func runLocked(ctx context.Context, g *globalOptions, o *runOptions, names []string, argv []string) (rerr error) {
	killSig, err := o.validate(names, argv)
	if err != nil {
		return err
	}
	// Catch signals from the start: while waiting they abort the wait,
	// while the command runs they are forwarded to it.
	sigc := make(chan os.Signal, 8)
	signals.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigc)
	gd, err := spawnGuardian(g, o)
	if err != nil {
		return err
	}
	defer gd.Close()

	cli, err := g.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	s, err := openSession(ctx, g, cli, o, names)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			_, _ = g.endSession(ctx, s, isUnavailable(rerr))
		}
	}()

	l, err := acquireWaiting(ctx, g, s, names, o, sigc)
	if err != nil {
		return err
	}
	g.logger.Info("acquired", fieldsOf(l)...)
	r := superviseCommand(&supervisor{g: g, gd: gd, l: l, s: s, o: o, argv: argv, killSig: killSig}, sigc)
	if errors.Is(r.err, lock.ErrBreakRequested) {
		g.releaseBroken(ctx, s, l)
	}
	if r.err != nil {
		return r.err
	}
	if err := heldThroughout(ctx, g, s, l); err != nil {
		return err
	}
	closed = true
	g.releaseAtEnd(ctx, s, l, names[0])
	if r.code != 0 {
		return &exitErr{code: r.code, signal: r.sig}
	}
	return nil
}

// spawnGuardian starts the guardian of --containment now, so that its
// start-up overlaps connecting and acquiring; it is given the command once
// the lock is held, and ended (Close) if the lock never is.
func spawnGuardian(g *globalOptions, o *runOptions) (*guardian.Guardian, error) {
	contain, err := guardian.ParseContainment(o.contain)
	if err != nil {
		return nil, usageErr("--containment: %v", err)
	}
	gd, err := guardian.Spawn(guardian.Stdio{Stdin: g.stdin, Stdout: g.stdout, Stderr: g.stderr}, contain)
	if err != nil {
		return nil, guardianErr(fmt.Errorf("cannot start the guardian: %w", err))
	}
	return gd, nil
}

// session is a run's lock session, with what the run opened it with.
type session struct {
	*lock.Session
	cli   *clientv3.Client // the session's
	owner string           // --owner, else a new identity
	names []string         // the names the run acquires, in the order given
}

// margin is the session's safety margin, the default as run sets none:
// etcd cannot expire the lease before Deadline + margin.
func (s *session) margin() time.Duration { return pkglease.DefaultMargin(s.TTL()) }

// openSession opens the session of a run that acquires names on cli, with
// --ttl and --owner, within --request-timeout.
func openSession(ctx context.Context, g *globalOptions, cli *clientv3.Client, o *runOptions, names []string) (*session, error) {
	owner := cmp.Or(o.owner, detached.NewOwner())
	opts := []lock.SessionOption{lock.WithPrefix(g.prefix), lock.WithLogger(withDelayNotes(g.logger.Named("lock"), g.printer)), lock.WithTTL(o.ttl),
		lock.WithCleanupTimeout(g.requestTimeout), lock.WithOwner(owner)}
	sctx, cancel := g.requestCtx(ctx)
	defer cancel()
	s, err := lock.NewSession(sctx, cli, opts...)
	if err != nil {
		return nil, err
	}
	return &session{Session: s, cli: cli, owner: owner, names: names}, nil
}

// releaseBroken releases l once a break request stopped its command:
// every process of the command is gone. The key may be on a lease of its
// own (break fenced the run), which the session's end would not take with
// it.
func (g *globalOptions) releaseBroken(ctx context.Context, s *session, l *lock.Lock) {
	rctx, cancel := g.requestCtx(context.WithoutCancel(ctx))
	if err := l.Release(rctx); err != nil {
		g.printer.Note("release of %s after the break request failed: %v", lockNames(s.names), err)
	}
	cancel()
}

// releaseAtEnd releases l, held until its command exited, by closing s:
// revoking the lease deletes the key, and only this lease's key, in one
// write (a Release first would be a second). A release that fails is a
// note; the lease then expires on its own.
func (g *globalOptions) releaseAtEnd(ctx context.Context, s *session, l *lock.Lock, name string) {
	switch abandoned, err := g.endSession(ctx, s, false); {
	case abandoned: // heldThroughout got no answer
		g.printer.Note("%s not released: etcd did not answer; it is free once its lease expires, within %v", lockNames(s.names), s.TTL())
	case errors.Is(err, lock.ErrMarkersKept):
		g.printer.Note("%s released, but its lock-delay marker stayed: the next holder waits the delay: %v", lockNames(s.names), err)
	case err != nil:
		g.printer.Note("release of %q failed (the lease expires on its own): %v", name, err)
	}
}

// endSession ends s, releasing its locks: it closes s (a revoke), or, when
// etcd did not answer (unanswered, or the last request that ended got no
// answer), abandons it: a revoke would wait its own --request-timeout for
// an answer that does not come, and the lease, with any key it holds,
// expires within --ttl. It reports whether it abandoned s, and Close's
// error.
func (g *globalOptions) endSession(ctx context.Context, s *session, unanswered bool) (abandoned bool, err error) {
	if unanswered || g.unanswered.Load() {
		s.Abandon()
		return true, nil
	}
	rctx, cancel := g.requestCtx(context.WithoutCancel(ctx))
	defer cancel()
	return false, s.Close(rctx)
}

// heldThroughout returns an error wrapping lock.ErrLost if l's keys are
// not this session's once its command has exited. The session learns of a
// deleted key (a break) or a revoked lease from its watch, which may tell
// it only after the command, which may itself have broken the lock, has
// exited. A key never comes back with the same create revision: found now
// with the session's lease, it was there all the while the command ran. A
// key gone now may have gone just after the command exited: the loss is
// reported all the same. A key found with the run's create revision but
// another lease (or none) was overwritten by a put: it would outlive the
// session and block the name for good, so the same transaction deletes it
// (by its create revision: it is still this run's key). The loss names the
// names whose key failed, from each name's nested transaction. If etcd
// cannot say, a note says so and the command's own status stands.
func heldThroughout(ctx context.Context, g *globalOptions, s *session, l *lock.Lock) error {
	keys := l.Keys()
	keys[0] = l.Key() // a semaphore's slot key, whose create revision is the token
	tok := int64(l.Token())
	// One nested transaction per key, none at the top: etcd bounds each
	// level's operations (128 by default), and a top-level compare of
	// every key's two fields would exceed it for a set of 64 names.
	perKey := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		mine := clientv3.Compare(clientv3.CreateRevision(k), "=", tok)
		held := []clientv3.Cmp{mine, clientv3.Compare(clientv3.LeaseValue(k), "=", s.Lease())}
		perKey[i] = clientv3.OpTxn(held, nil, []clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{mine}, []clientv3.Op{clientv3.OpDelete(k)}, nil)})
	}
	rctx, cancel := g.requestCtx(context.WithoutCancel(ctx))
	defer cancel()
	resp, err := checkTries(rctx, s.cli, perKey)
	if err != nil {
		g.printer.Note("could not confirm that %s was held until the command exited: %v", lockNames(s.names), err)
		return nil
	}
	var gone, overwritten []string
	for i, name := range s.names {
		r := resp.Responses[i].GetResponseTxn()
		switch {
		case r.GetSucceeded():
		case len(r.GetResponses()) == 1 && r.GetResponses()[0].GetResponseTxn().GetSucceeded():
			overwritten = append(overwritten, name)
		default:
			gone = append(gone, name)
		}
	}
	if len(gone)+len(overwritten) == 0 {
		return nil
	}
	var why []string
	if len(gone) > 0 {
		why = append(why, fmt.Sprintf("%s lost while the command ran: its key is gone (broken, or its lease revoked or expired)", lockNames(gone)))
	}
	if len(overwritten) > 0 {
		why = append(why, fmt.Sprintf("%s lost while the command ran: its key was overwritten by a write without the run's lease (deleted now, so that it does not block the name)", lockNames(overwritten)))
	}
	return fmt.Errorf("%s: %w", strings.Join(why, "; "), lock.ErrLost)
}

// checkFirstTry bounds the first try of heldThroughout's check when the
// client has several endpoints; each later try gets twice the last.
const checkFirstTry = time.Second

// checkTries sends heldThroughout's transaction of ops until etcd answers
// it or ctx ends. With several endpoints each try is bounded
// (checkFirstTry, then twice the last) and, unanswered, canceled and sent
// again, which the client sends to its next endpoint: one member that
// holds it (frozen, cut off) would otherwise hold the run's end, and the
// next holder with it, for all of --request-timeout. A try that lands
// late changes nothing: the transaction deletes only a key of this run's
// create revision, which no later key has. With one endpoint the one try
// has all of ctx.
func checkTries(ctx context.Context, cli *clientv3.Client, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	bound := checkFirstTry
	for {
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if len(cli.Endpoints()) > 1 {
			tctx, cancel = context.WithTimeout(ctx, bound)
		}
		resp, err := cli.Txn(tctx).Then(ops...).Commit()
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return resp, err
		}
		bound *= 2
	}
}

// someOf is names as a loss that etcdlock cannot attribute shows them:
// lock "a", or one of locks "a", "b".
func someOf(names []string) string {
	if len(names) == 1 {
		return lockNames(names)
	}
	return "one of " + lockNames(names)
}

// lockNames is names as messages show them: lock "a", or locks "a", "b".
func lockNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return "lock " + q[0]
	}
	return "locks " + strings.Join(q, ", ")
}

// lostWaiting is err with its own exit code if it says that the session
// was lost while waiting for name: nothing ran, unlike a loss (79) while
// the command runs.
func lostWaiting(err error, name string) error {
	if errors.Is(err, lock.ErrLost) || errors.Is(err, lock.ErrSessionLost) {
		return withCode(exitcode.LostWaiting, fmt.Errorf("session lost while waiting for lock %q, before the command ran: %w", name, err))
	}
	return err
}

// guardianErr is err, a guardian that could not start, with the exit code
// of a configuration error when --containment pid-namespace asked for what
// the system refuses.
func guardianErr(err error) error {
	if errors.Is(err, guardian.ErrNoNamespace) {
		return withCode(exitcode.Config, err)
	}
	return err
}
