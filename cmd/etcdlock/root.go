package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
	"github.com/etcdlock/etcdlock/cmd/internal/logging"
	"github.com/etcdlock/etcdlock/cmd/internal/notes"
	"github.com/etcdlock/etcdlock/pkg/detached"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// noteQueue is how many of etcdlock's messages may wait for a slow
// stderr, and noteFlush how long etcdlock waits at its exit for them to
// be written before it drops them.
const (
	noteQueue = 64
	noteFlush = time.Second
)

// globalOptions are the flags every command accepts.
type globalOptions struct {
	// terminalSignal is set when the command, in the terminal's
	// foreground, died of the terminal's SIGINT or SIGQUIT: etcdlock then
	// dies of it with its whole process group (see signals.ReraiseGroup).
	terminalSignal bool

	endpoints      []string
	dialTimeout    time.Duration
	requestTimeout time.Duration
	prefix         string
	cacert         string
	cert           string
	key            string
	insecureTLS    bool
	tlsConfig      *tls.Config // built from the TLS flags by client; nil without TLS
	user           string
	password       string
	output         string
	logLevel       string
	quiet          bool
	conflictCode   int // --conflict-exit-code; 0 keeps the codes of the table

	stdin          io.Reader
	stdout, stderr io.Writer
	errq           io.Writer // stderr for etcdlock's own messages: a notes.Queue
	logger         *zap.Logger
	printer        *printer
	probes         probes // of the endpoints, started by a slow request (see diagnose)
	unanswered     unanswered
}

// Main runs the CLI with args and returns the process exit code. It is
// the one exit point: every error ends here, with its code from exitCode
// and its message from explain.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	code, _, _ := execute(args, stdin, stdout, stderr)
	return code
}

// execute is Main that also returns the signal etcdlock should die of,
// after its exit code is known, as a wrapper such as flock would have died
// of it (see signals.Reraise); 0 for none. group says that the signal came
// from the terminal to the command alone, and is for etcdlock's whole
// process group (see signals.ReraiseGroup).
func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int, sig syscall.Signal, group bool) {
	// etcdlock's own messages never wait on stderr (a pipe nobody reads,
	// a paused terminal): a note on the path that stops the command, or
	// the last error, would hold up the stop or the exit.
	// Written from a thread that blocks the terminal stops: while the
	// command has the terminal, etcdlock is in a background group, and
	// with `stty tostop` a note would stop it, and its renewals with it.
	errq := notes.New(stderr, noteQueue, notes.TerminalThread)
	defer errq.Close(noteFlush)
	g := &globalOptions{stdin: stdin, stdout: stdout, stderr: stderr, errq: errq, logger: zap.NewNop()}
	g.printer = &printer{format: "simple", out: &failedWrite{w: stdout}, errOut: errq}
	root := newRootCommand(g)
	root.SetArgs(commandLine(root, args))
	root.SetIn(stdin)

	root.SetErr(stderr)
	err := root.ExecuteContext(context.Background())
	defer g.probes.wait() // a probe started by a request that then succeeded ends with it
	// A result that did not reach its reader is a failure: the printer's
	// (which its callers may ignore) or cobra's (help, completion
	// scripts, whose error would otherwise read as a configuration
	// error); one that a command already explained keeps its words.
	if werr := g.printer.out.err; werr != nil && (err == nil || err == g.printer.notWritten() || errors.Is(err, werr) && !errors.As(err, new(*exitErr))) {
		// A reader that closed the pipe (`| head`) wanted no more: not a
		// failure, as for the shell's own commands.
		if errors.Is(werr, syscall.EPIPE) {
			return exitcode.OK, 0, false
		}
		err = g.printer.notWritten()
	}
	if err == nil {
		return exitcode.OK, 0, false
	}
	if exitCode(err) == exitcode.Unavailable {
		err = g.diagnose(err)
	}
	code = exitCode(err)
	conflict := (code == exitcode.NotAcquired || code == exitcode.Timeout) && !errors.Is(err, errRunTimeout)
	if conflict && g.conflictCode != 0 {
		code = g.conflictCode
	}
	if conflict && g.quiet {
		return code, 0, false
	}
	if msg := g.explain(err, exitCode(err)); msg != "" {
		g.printer.Error(msg, code)
		if code == exitcode.Usage && !strings.Contains(msg, "--help") {
			fmt.Fprintln(errq, "Run 'etcdlock --help' for usage.")
		}
	}
	return code, diedOf(err), g.terminalSignal
}

// rootLong is etcdlock's help text.
const rootLong = `etcdlock runs commands under etcd locks and exposes lock operations to scripts.

A lock holder keeps an etcd lease alive and stops before etcd could expire it.
Every holder gets a fencing token (ETCDLOCK_TOKEN), strictly larger than any
earlier holder's: pass it with every write so that a resource can reject a
holder that has been superseded.

Every flag can also be set with an environment variable ETCDLOCK_<FLAG>, dashes
as underscores (ETCDLOCK_ENDPOINTS, ETCDLOCK_TTL, ...); a flag on the command
line wins. ETCDCTL_ENDPOINTS is used when ETCDLOCK_ENDPOINTS is not set. The
TLS --key flag reads ETCDLOCK_KEY_FILE (ETCDLOCK_KEY is the lock key that run
gives to its command). ETCDLOCK_OWNER and ETCDLOCK_TOKEN, which run gives to its
command and acquire prints, belong to the lock ETCDLOCK_NAME when that is set:
only renew, release and break of that lock read them, so that an etcdlock called
by a run's command on another lock, or a nested run, does not act as the outer
holder.

See 'etcdlock help exit-codes' for the exit codes.`

func newRootCommand(g *globalOptions) *cobra.Command {
	root := &cobra.Command{
		Use:               "etcdlock",
		Short:             "Distributed locks on etcd that stay safe when networks fail",
		Long:              rootLong,
		SilenceErrors:     true,
		SilenceUsage:      true,
		PersistentPreRunE: g.preRun,
	}
	if g.printer != nil {
		// cobra's own output (help, completion scripts) is a result too.
		// Set before the completion command, which keeps the writer it
		// finds.
		root.SetOut(g.printer.out)
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withCode(exitcode.Usage, err) })
	g.bind(root.PersistentFlags())

	root.AddCommand(
		newRunCommand(g), newElectCommand(g),
		newAcquireCommand(g), newRenewCommand(g), newReleaseCommand(g),
		newStatusCommand(g), newListCommand(g), newLeaderCommand(g), newBreakCommand(g),
		newKubeLeadersCommand(g),
		newDevCommand(), newVersionCommand(g),
		newExitCodesTopic(),
	)
	root.AddCommand(extraCommands()...)
	refuseUnknownCommands(root)
	registerCompletions(g, root)
	return root
}

// bind binds the global flags to g.
func (g *globalOptions) bind(f *pflag.FlagSet) {
	f.StringSliceVar(&g.endpoints, "endpoints", []string{"127.0.0.1:2379"}, "etcd endpoints, comma separated: host:port, http:// or https:// with host:port, or unix:path; others are refused (exit 64)")
	f.DurationVar(&g.dialTimeout, "dial-timeout", 5*time.Second, "timeout for connecting to etcd")
	f.DurationVar(&g.requestTimeout, "request-timeout", 5*time.Second, "timeout for each etcd request, a clean-up after a failed one included; an etcd that does not answer fails the call once it has passed, with the reason found meanwhile (not for waiting on a lock, nor for the command: see run's --timeout and --run-timeout)")
	f.DurationVar(&g.requestTimeout, "command-timeout", 5*time.Second, "old name of --request-timeout")
	// Hidden rather than marked deprecated: pflag would print its notice
	// on stdout, into the output scripts eval or parse; preRun's note goes
	// to stderr.
	_ = f.MarkHidden("command-timeout")
	f.StringVar(&g.prefix, "prefix", lock.DefaultPrefix, "etcd key prefix of all locks; must end in '/'")
	f.StringVar(&g.cacert, "cacert", "", "verify the etcd server's certificate with this CA bundle")
	f.StringVar(&g.cert, "cert", "", "client certificate file for TLS")
	f.StringVar(&g.key, "key", "", "client private key file for TLS (environment: ETCDLOCK_KEY_FILE)")
	f.BoolVar(&g.insecureTLS, "insecure-skip-tls-verify", false, "do not verify the server's certificate (unsafe); applies to TLS, which --cacert, --cert or https:// endpoints turn on: alone it is refused (exit 64)")
	f.StringVar(&g.user, "user", "", "etcd user name, or user:password")
	f.StringVar(&g.password, "password", "", "etcd password (prefer ETCDLOCK_PASSWORD to keep it out of ps)")
	f.StringVarP(&g.output, "write-out", "w", "simple", "output format: simple or json")
	f.StringVar(&g.logLevel, "log-level", "error", "log level on stderr: debug, info, warn, error")
	f.BoolVarP(&g.quiet, "quiet", "q", false, "no notes on stderr, etcdlock's nor its guardian's (waits, stops of the command, leftovers stopped), and no message when the lock is held (--try, acquire: exit 75) or --timeout passed; other errors that end etcdlock are still printed")
	f.IntVarP(&g.conflictCode, "conflict-exit-code", "E", 0, "exit with this code instead of 75 when the lock is held (--try, acquire) and instead of 124 when --timeout passes, as flock's -E; 1-255 (default: 75 and 124)")
}

// preRun applies the environment to cmd's flags and checks the global
// flags, before any command but a completion request runs.
func (g *globalOptions) preRun(cmd *cobra.Command, args []string) error {
	if cmd.Name() == cobra.ShellCompRequestCmd || cmd.Name() == cobra.ShellCompNoDescRequestCmd {
		// A completion parses the command line it completes itself,
		// after this: the environment applied now, before its
		// --endpoints, would be added to the flag's (a slice flag
		// appends). completeNames applies it.
		return nil
	}
	if err := applyEnv(cmd, args); err != nil {
		return err
	}
	if err := g.setup(); err != nil {
		return err
	}
	for _, old := range renamed {
		if f := cmd.Flags().Lookup(old); f != nil && f.Changed {
			g.printer.Note("flag --%s is deprecated, %s", old, deprecated[old])
		}
	}
	return nil
}

// newExitCodesTopic is `etcdlock help exit-codes`. Its text is built when
// it is shown, not on every start.
func newExitCodesTopic() *cobra.Command {
	c := &cobra.Command{Use: "exit-codes", Short: "Exit codes of etcdlock"}
	c.SetHelpFunc(func(c *cobra.Command, args []string) {
		c.Long = exitcode.Help()
		c.Parent().HelpFunc()(c, args)
	})
	return c
}

func (g *globalOptions) setup() error {
	switch g.output {
	case "simple", "json":
		g.printer.format = g.output
	default:
		return usageErr("--write-out %q: want simple or json", g.output)
	}
	lg, err := logging.New(g.logLevel, g.errq)
	if err != nil {
		return usageErr("--log-level %q: %v", g.logLevel, err)
	}
	g.logger = lg
	// The library's check of the prefix every command passes it.
	if err := lock.ValidateSessionOptions(lock.WithPrefix(g.prefix)); err != nil {
		return usageErr("--prefix: %w", err)
	}
	if g.conflictCode < 0 || g.conflictCode > 255 {
		return usageErr("--conflict-exit-code %d: must be between 1 and 255", g.conflictCode)
	}
	g.printer.quiet = g.quiet
	if g.dialTimeout <= 0 || g.requestTimeout <= 0 {
		return usageErr("--dial-timeout and --request-timeout must be positive")
	}
	return nil
}

// client connects to etcd with the global flags.
func (g *globalOptions) client() (*clientv3.Client, error) {
	eps, err := checkEndpoints(g.endpoints)
	if err != nil {
		return nil, err
	}
	g.endpoints = eps
	cfg := clientv3.Config{
		Endpoints:   g.endpoints,
		DialTimeout: g.dialTimeout,
		Logger:      g.logger.Named("etcd-client"),
		Username:    g.user,
		Password:    g.password,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(g.unanswered.intercept)},
	}
	if user, pass, ok := strings.Cut(g.user, ":"); ok && g.password == "" {
		cfg.Username, cfg.Password = user, pass
	}
	if g.insecureTLS && g.cacert == "" && g.cert == "" && g.key == "" && !slices.ContainsFunc(g.endpoints, isTLSEndpoint) {
		// etcdctl does not turn TLS on for it either; ignored, it would
		// leave a user who meant TLS talking in the clear.
		return nil, usageErr("--insecure-skip-tls-verify applies to TLS, which nothing here turns on: give --cacert, --cert and --key, or https:// endpoints")
	}
	if g.cacert != "" || g.cert != "" || g.key != "" || g.insecureTLS {
		if (g.cert == "") != (g.key == "") {
			return nil, withCode(exitcode.Config, errors.New("--cert and --key must be given together"))
		}
		if err := g.checkTLSFiles(); err != nil {
			return nil, withCode(exitcode.Config, fmt.Errorf("TLS configuration: %w", err))
		}
		info := transport.TLSInfo{CertFile: g.cert, KeyFile: g.key, TrustedCAFile: g.cacert, InsecureSkipVerify: g.insecureTLS}
		tlsCfg, err := info.ClientConfig()
		if err != nil {
			return nil, withCode(exitcode.Config, fmt.Errorf("TLS configuration: %w", err))
		}
		cfg.TLS = tlsCfg
		g.tlsConfig = tlsCfg
	}
	cli, err := clientv3.New(cfg)
	if err == nil {
		g.probes.use(cli)
	}
	return cli, err
}

// isTLSEndpoint says whether etcd's client speaks TLS to ep whatever the
// TLS flags: its scheme asks for it.
func isTLSEndpoint(ep string) bool {
	return strings.HasPrefix(ep, "https://") || strings.HasPrefix(ep, "unixs://") || strings.HasPrefix(ep, "unixs:")
}

// checkEndpoints returns endpoints as etcd's client is to be given them,
// each trimmed of spaces and its scheme in lower case (etcd's client
// lower-cases an http or https scheme but this package's TLS checks would
// not); it refuses, at once, endpoints that the client cannot dial: an
// empty list (the client fails with "no available endpoints", exit 1),
// and an empty endpoint, one without a port or with a port that is no
// number or service name, a malformed one, one with a control character
// or an IPv6 zone, or one of another scheme than http, https, unix or
// unixs, each of which it would dial until the request's deadline and
// then exit 69 as if etcd were down. It accepts what the client dials:
// host:port, http:// or https:// with host:port (a path is ignored),
// unix: or unixs: with a path.
func checkEndpoints(endpoints []string) ([]string, error) {
	if len(endpoints) == 0 {
		return nil, usageErr("--endpoints (or ETCDLOCK_ENDPOINTS) is empty: give at least one etcd endpoint, host:port or a URL")
	}
	eps := make([]string, len(endpoints))
	for i, ep := range endpoints {
		ep = strings.TrimSpace(ep)
		if ep == "" {
			return nil, usageErr("--endpoints %q has an empty endpoint: give host:port or URLs, comma separated", strings.Join(endpoints, ","))
		}
		if scheme, rest, ok := strings.Cut(ep, ":"); ok {
			switch lower := strings.ToLower(scheme); lower {
			case "http", "https", "unix", "unixs":
				ep = lower + ":" + rest
			}
		}
		if why := endpointFault(ep); why != "" {
			return nil, usageErr("--endpoints: %q %s: give host:port, http://host:port, https://host:port or unix:path", ep, why)
		}
		eps[i] = ep
	}
	return eps, nil
}

// endpointFault says what keeps etcd's client from dialing ep, trimmed
// and its scheme in lower case, or "". The client's rules are those of
// go.etcd.io/etcd/client/v3/internal/endpoint; gRPC then parses the
// address as a URL.
func endpointFault(ep string) string {
	if strings.HasPrefix(ep, "unix:") || strings.HasPrefix(ep, "unixs:") {
		if socketPath(ep) == "" {
			return "has no socket path"
		}
		return "" // any other path is the file system's to refuse
	}
	if strings.ContainsFunc(ep, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return "has a space or a control character"
	}
	hostPort := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil {
			return "is not a URL"
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Sprintf("has the scheme %q, which etcd's client does not dial", u.Scheme)
		}
		hostPort = u.Host
	}
	host, port, err := net.SplitHostPort(hostPort)
	switch {
	case err != nil && strings.Contains(err.Error(), "missing port"):
		return "has no port"
	case err != nil:
		return "is not host:port"
	case port == "":
		return "has no port"
	case strings.Contains(host, "%"):
		return "has an IPv6 zone, which etcd's client cannot dial"
	}
	if n, err := strconv.Atoi(port); err == nil {
		if n < 1 || n > 65535 {
			return "has a port out of range (1-65535)"
		}
		return ""
	}
	if _, err := net.LookupPort("tcp", port); err != nil { // a name in /etc/services
		return fmt.Sprintf("has the port %q, neither a number nor a service name", port)
	}
	return ""
}

// socketPath is the socket path of a unix: or unixs: endpoint, as etcd's
// client reads it: unix:///abs, unix://rel (legacy), unix:path.
func socketPath(ep string) string {
	_, path, _ := strings.Cut(ep, ":")
	return strings.TrimPrefix(path, "//")
}

// checkTLSFiles reads the TLS files given, so that one that cannot serve
// fails at once and names its flag: etcd's TLS configuration takes a
// --cacert without a PEM certificate for an empty CA pool, and every
// handshake then fails until the request's deadline.
func (g *globalOptions) checkTLSFiles() error {
	if g.cacert != "" {
		b, err := os.ReadFile(g.cacert)
		if err != nil {
			return fmt.Errorf("--cacert: %w", err)
		}
		n := 0
		for rest := b; ; {
			var block *pem.Block
			if block, rest = pem.Decode(rest); block == nil {
				break
			}
			if block.Type != "CERTIFICATE" {
				continue
			}
			if _, err := x509.ParseCertificate(block.Bytes); err != nil {
				return fmt.Errorf("--cacert %s: %w", g.cacert, err)
			}
			n++
		}
		if n == 0 {
			return fmt.Errorf("--cacert %s is not a PEM certificate (no -----BEGIN CERTIFICATE----- block)", g.cacert)
		}
	}
	if g.cert != "" {
		if _, err := tls.LoadX509KeyPair(g.cert, g.key); err != nil {
			return fmt.Errorf("--cert %s and --key %s: %w", g.cert, g.key, err)
		}
	}
	return nil
}

// request connects to etcd and calls fn with the client and a context
// bounded by --request-timeout, for commands that make a few requests.
func (g *globalOptions) request(ctx context.Context, fn func(ctx context.Context, cli *clientv3.Client) error) error {
	return g.requestFor(ctx, g.requestTimeout, fn)
}

// requestFor is request bounded by d instead: for one that may also wait.
func (g *globalOptions) requestFor(ctx context.Context, d time.Duration, fn func(ctx context.Context, cli *clientv3.Client) error) error {
	cli, err := g.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	rctx, cancel := g.requestCtxFor(ctx, d)
	defer cancel()
	return fn(rctx, cli)
}

// read is request for a command that only reads (status, list, leader):
// fn is called again, every readRetry, while it fails because etcd is
// briefly unavailable (a leader change, no leader yet, a member that has
// stopped) and --request-timeout has not passed. Right after the leader
// is killed a read otherwise fails at once with etcd's "leader changed".
func (g *globalOptions) read(ctx context.Context, fn func(ctx context.Context, cli *clientv3.Client) error) error {
	return g.request(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		return retryRead(ctx, func(ctx context.Context) error { return fn(ctx, cli) })
	})
}

// readRetry is how long read waits before it calls its function again.
const readRetry = 100 * time.Millisecond

// retryRead calls fn until it succeeds, fails otherwise than with etcd
// unavailable (isUnavailable), or ctx ends; it returns fn's last error.
func retryRead(ctx context.Context, fn func(ctx context.Context) error) error {
	for {
		err := fn(ctx)
		if err == nil || !isUnavailable(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(readRetry):
		}
	}
}

// detached is request with detached.Locks for the script commands.
func (g *globalOptions) detached(ctx context.Context, fn func(ctx context.Context, d *detached.Locks) error) error {
	return g.request(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		d, err := detached.New(cli, lock.WithPrefix(g.prefix), lock.WithCleanupTimeout(g.requestTimeout))
		if err != nil {
			return err
		}
		return fn(ctx, d)
	})
}

// requestCtx bounds one etcd request by --request-timeout. A request not
// done at half of it starts the probe of the endpoints, within the same
// deadline, which diagnose reads if the request fails (see diagnose).
func (g *globalOptions) requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return g.requestCtxFor(ctx, g.requestTimeout)
}

// requestCtxFor is requestCtx for a request bounded by d instead: one
// that may also wait (run --try waits out a --lock-delay).
func (g *globalOptions) requestCtxFor(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithTimeout(ctx, d)
	t := time.AfterFunc(d/2, func() { g.probes.start(rctx, g) })
	return rctx, func() {
		timedOut := errors.Is(rctx.Err(), context.DeadlineExceeded)
		cancel()
		if !t.Stop() {
			g.probes.ended(rctx, timedOut)
		}
	}
}
