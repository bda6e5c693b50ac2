package main

import (
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// noEnv marks a flag that applyEnv leaves alone.
const noEnv = "etcdlock/no-env"

// grantFlags name a grant: run exports them to its command and acquire
// prints them (ETCDLOCK_OWNER, ETCDLOCK_TOKEN) with ETCDLOCK_NAME, the
// lock they belong to.
var grantFlags = []string{"owner", "token"}

// renamed maps a flag to its deprecated old name, which still sets it: on
// the command line (a flag of its own, marked deprecated) and as
// ETCDLOCK_<OLD> when ETCDLOCK_<NEW> is not set.
var renamed = map[string]string{"request-timeout": "command-timeout"}

// deprecated says, for each old name in renamed, what to use instead.
var deprecated = map[string]string{"command-timeout": "use --request-timeout (it bounds each etcd request, not the command)"}

// applyEnv sets every flag not given on the command line from
// ETCDLOCK_<FLAG>, and --endpoints from ETCDCTL_ENDPOINTS as a fallback.
// Flags annotated noEnv are only read from the command line.
//
// The grant flags are scoped by ETCDLOCK_NAME: when it is set, they are
// the grant of that lock, and are read only by a command on that lock
// (args[0]) that uses a grant (renew, release, break). A command run by
// `etcdlock run` that calls etcdlock on another lock, or runs another
// `run` or `elect`, must name its own.
func applyEnv(cmd *cobra.Command, args []string) error {
	scoped, inGrant := os.LookupEnv("ETCDLOCK_NAME")
	acquires := cmd.Name() == "run" || cmd.Name() == "elect"
	onThatLock := len(args) > 0 && args[0] == scoped
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" || f.Annotations[noEnv] != nil || deprecated[f.Name] != "" {
			return
		}
		old, isRenamed := renamed[f.Name]
		if isRenamed && cmd.Flags().Changed(old) {
			return
		}
		if inGrant && slices.Contains(grantFlags, f.Name) && (acquires || !onThatLock) {
			return
		}
		env := envName(f.Name)
		v, ok := os.LookupEnv(env)
		if !ok && f.Name == "endpoints" {
			v, ok = os.LookupEnv("ETCDCTL_ENDPOINTS")
			env = "ETCDCTL_ENDPOINTS"
		}
		if !ok && isRenamed {
			env = envName(old)
			v, ok = os.LookupEnv(env)
		}
		if !ok {
			return
		}
		if serr := cmd.Flags().Set(f.Name, v); serr != nil {
			err = usageErr("%s=%q: %v", env, v, serr)
		}
	})
	return err
}

// envName is the environment variable of a flag: ETCDLOCK_<FLAG>, except
// --key, whose natural name ETCDLOCK_KEY is the lock key that run gives to
// its command; --key reads ETCDLOCK_KEY_FILE instead.
func envName(flag string) string {
	if flag == "key" {
		return "ETCDLOCK_KEY_FILE"
	}
	return "ETCDLOCK_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// childEnv returns base with ours set, removing inherited values of the
// same names so that ours win.
func childEnv(base []string, ours map[string]string) []string {
	env := make([]string, 0, len(base)+len(ours))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := ours[k]; !ok {
			env = append(env, kv)
		}
	}
	for k, v := range ours {
		env = append(env, k+"="+v)
	}
	return env
}
