package main

import (
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// noEnv marks a flag that applyEnv leaves alone.
const noEnv = "etcdlock/no-env"

// applyEnv sets every flag not given on the command line from
// ETCDLOCK_<FLAG>, and --endpoints from ETCDCTL_ENDPOINTS as a fallback.
// Flags annotated noEnv are only read from the command line.
func applyEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" || f.Annotations[noEnv] != nil {
			return
		}
		env := envName(f.Name)
		v, ok := os.LookupEnv(env)
		if !ok && f.Name == "endpoints" {
			v, ok = os.LookupEnv("ETCDCTL_ENDPOINTS")
			env = "ETCDCTL_ENDPOINTS"
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
