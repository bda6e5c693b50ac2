package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

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

func printGrant(g *globalOptions, gr lock.Grant) {
	v := grantView{Name: gr.Name, Key: gr.Key, Owner: gr.Owner, Token: gr.Token,
		Lease: fmt.Sprintf("%x", int64(gr.LeaseID)), TTL: gr.TTL.String(), Deadline: gr.Deadline.UTC()}
	g.printer.Print(v, func(w io.Writer) {
		// Shell assignments, so that a script can eval them.
		for _, kv := range [][2]string{
			{"ETCDLOCK_NAME", v.Name}, {"ETCDLOCK_KEY", v.Key}, {"ETCDLOCK_OWNER", v.Owner},
			{fencing.EnvVar, v.Token.String()}, {"ETCDLOCK_LEASE", v.Lease},
			{"ETCDLOCK_DEADLINE", v.Deadline.Format(time.RFC3339Nano)},
		} {
			fmt.Fprintf(w, "%s=%s\n", kv[0], shellQuote(kv[1]))
		}
	})
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// scriptArgs validates the NAME argument and --owner of the script commands.
func scriptArgs(name, owner string) error {
	if err := lock.ValidateName(name); err != nil {
		return usageErr("%v", err)
	}
	if owner == "" {
		return usageErr("--owner is required (or ETCDLOCK_OWNER): scripts identify themselves on every call")
	}
	return nil
}

func parseTokenFlag(s string) (fencing.Token, error) {
	if s == "" {
		return 0, usageErr("--token is required (or ETCDLOCK_TOKEN)")
	}
	t, err := fencing.ParseToken(s)
	if err != nil {
		return 0, usageErr("--token: %v", err)
	}
	return t, nil
}
