package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/detached"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// contenderView is how status and list print a holder or waiter.
type contenderView struct {
	Owner    string        `json:"owner"`
	Token    fencing.Token `json:"token"`
	Host     string        `json:"host,omitempty"`
	PID      int           `json:"pid,omitempty"`
	Since    string        `json:"since"`
	Key      string        `json:"key"`
	Lease    string        `json:"lease,omitempty"`
	LeaseTTL int64         `json:"lease_ttl_seconds,omitempty"` // holder only
	// Foreign: the key has no etcdlock record (etcdctl lock, concurrency.Mutex).
	Foreign bool `json:"foreign,omitempty"`
	Shared  bool `json:"shared,omitempty"` // a reader of a read-write lock (run --shared)
	Limit   int  `json:"limit,omitempty"`  // a semaphore's limit (run --limit)
	Slot    *int `json:"slot,omitempty"`   // a semaphore holder's slot
	// Names lists the set of a run of several names, in its order.
	Names []string `json:"names,omitempty"`
	// BreakRequested is when etcdlock break asked the holder to release.
	BreakRequested string `json:"break_requested,omitempty"`
}

func viewOf(c holders.Contender) contenderView {
	v := contenderView{Owner: c.Owner, Token: c.Token, Host: c.Host, PID: c.PID, Since: since(c.Acquired),
		Key: c.Key, Lease: fmt.Sprintf("%x", int64(c.LeaseID)), Foreign: c.Foreign, Shared: c.Shared, Limit: c.Limit, Names: c.Names}
	if !c.BreakRequested.IsZero() {
		v.BreakRequested = since(c.BreakRequested)
	}
	if c.Slot >= 0 {
		slot := c.Slot
		v.Slot = &slot
	}
	return v
}

// holderView is viewOf(c) with the remaining TTL of c's lease, as far as
// etcd says.
func holderView(ctx context.Context, cli *clientv3.Client, c holders.Contender) contenderView {
	v := viewOf(c)
	if ttl, err := cli.TimeToLive(ctx, c.LeaseID); err == nil {
		v.LeaseTTL = ttl.TTL
	}
	return v
}

// viewsOf is viewOf of each of cs; [] (not null in JSON) for none.
func viewsOf(cs []holders.Contender) []contenderView {
	vs := make([]contenderView, 0, len(cs))
	for _, c := range cs {
		vs = append(vs, viewOf(c))
	}
	return vs
}

// role is how a holder of a read-write lock or semaphore is introduced.
func (v contenderView) role() string {
	switch {
	case v.Slot != nil:
		return fmt.Sprintf("slot %d", *v.Slot)
	case v.Shared:
		return "reader"
	}
	return "writer"
}

// who names the contender for people: its owner (escaped), or what a
// foreign key is.
func (v contenderView) who() string {
	if v.Foreign {
		return holders.ForeignHolder
	}
	return printable(v.Owner)
}

// printable is s as the simple format prints a name or an owner, which
// anyone who can write a lock chooses: as it is when every character of it
// is printable, else Go-quoted ("a\nb", "o\x1b[2J"), so that it cannot
// forge a line of output or act on the terminal. JSON output escapes by
// itself and prints them as they are.
func printable(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// when is how a contender's start is printed: a foreign key has none. A
// member of a set of names also says which names the set holds with it.
func (v contenderView) when() string {
	if v.Foreign {
		return ""
	}
	s := ", since " + v.Since
	if len(v.Names) > 1 {
		names := make([]string, len(v.Names))
		for i, n := range v.Names {
			names[i] = printable(n)
		}
		s += ", set " + strings.Join(names, " ")
	}
	if v.BreakRequested != "" {
		s += ", asked to release at " + v.BreakRequested
	}
	return s
}

// grantView is how acquire and renew print a grant.
type grantView struct {
	Name     string        `json:"name"`
	Key      string        `json:"key"`
	Owner    string        `json:"owner"`
	Token    fencing.Token `json:"token"`
	Lease    string        `json:"lease"`
	TTL      string        `json:"ttl"`
	Deadline time.Time     `json:"deadline"`
}

func printGrant(g *globalOptions, gr detached.Grant) error {
	v := grantView{Name: gr.Name, Key: gr.Key, Owner: gr.Owner, Token: gr.Token,
		Lease: fmt.Sprintf("%x", int64(gr.LeaseID)), TTL: gr.TTL.String(), Deadline: gr.Deadline.UTC()}
	quote := shellQuote
	if onTerminal(g.stdout) {
		// For a person: control characters escaped, as status shows
		// them, not sent to the terminal. A script that evals the
		// lines reads them from a pipe.
		quote = func(s string) string {
			if p := printable(s); p != s {
				return p
			}
			return shellQuote(s)
		}
	}
	return g.printer.Print(v, func(w io.Writer) {
		// Shell assignments, so that a script can eval them; in one
		// write, so that a reader never gets some of them only.
		var b strings.Builder
		for _, kv := range [][2]string{
			{"ETCDLOCK_NAME", v.Name}, {"ETCDLOCK_KEY", v.Key}, {"ETCDLOCK_OWNER", v.Owner},
			{fencing.EnvVar, v.Token.String()}, {"ETCDLOCK_LEASE", v.Lease},
			{"ETCDLOCK_DEADLINE", v.Deadline.Format(time.RFC3339Nano)},
		} {
			fmt.Fprintf(&b, "%s=%s\n", kv[0], quote(kv[1]))
		}
		_, _ = io.WriteString(w, b.String())
	})
}

// onTerminal reports whether w is a terminal (a character device: a
// terminal, or /dev/null, where nothing is read).
func onTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// since is how every command prints when a holder acquired its lock.
func since(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.Local().Format(time.RFC3339)
}

// fieldsOf is how a held lock appears in the log.
func fieldsOf(l *lock.Lock) []zap.Field {
	return []zap.Field{zap.String("name", l.Name()), zap.Stringer("token", l.Token()), zap.String("key", l.Key())}
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
