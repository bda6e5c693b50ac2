package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/holders"
)

// completionTimeout bounds the etcd requests of a shell completion: a
// shell waits for it at every Tab.
const completionTimeout = time.Second

// nameArgs are the commands whose first argument is a lock name (list's is
// a prefix of one); run and elect complete their COMMAND as the shell does.
var nameArgs = map[string]bool{
	"run": true, "elect": true, "acquire": true, "renew": true, "release": true,
	"status": true, "leader": true, "break": true, "list": true,
}

// completeNames lists the lock names under --prefix that start with
// toComplete, for a command's first argument.
func (g *globalOptions) completeNames(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		if cmd.Name() != "run" && cmd.Name() != "elect" {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		if len(args) == 1 && !strings.Contains(toComplete, "/") {
			return commandsInPath(toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveDefault
	}
	// Completion runs no PersistentPreRunE: the environment's flags are
	// applied here.
	if err := applyEnv(cmd, args); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	g.dialTimeout = min(g.dialTimeout, completionTimeout)
	var names []string
	err := g.request(context.Background(), func(ctx context.Context, cli *clientv3.Client) error {
		ctx, cancel := context.WithTimeout(ctx, completionTimeout)
		defer cancel()
		all, err := holders.List(ctx, cli, g.prefix, toComplete)
		for _, st := range all {
			if !strings.ContainsAny(st.Name, " \t\n") {
				names = append(names, st.Name)
			}
		}
		return err
	})
	if err != nil {
		cobra.CompDebugln(fmt.Sprint("lock names: ", err), false)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// commandsInPath lists the executables in $PATH's absolute directories
// whose names start with prefix, as a shell completes a command's first
// word.
func commandsInPath(prefix string) []string {
	seen := map[string]bool{}
	var cmds []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if !filepath.IsAbs(dir) {
			continue // run refuses a command found relative to the working directory (exec.ErrDot)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if !strings.HasPrefix(name, prefix) || seen[name] || e.IsDir() {
				continue
			}
			if _, err := exec.LookPath(filepath.Join(dir, name)); err != nil {
				continue // not executable (LookPath resolves links)
			}
			seen[name] = true
			cmds = append(cmds, name)
		}
	}
	sort.Strings(cmds)
	return cmds
}

// registerCompletions adds the completions of lock names and of the flags
// whose values are few.
func registerCompletions(g *globalOptions, root *cobra.Command) {
	fixed := func(values ...string) cobra.CompletionFunc {
		return cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
	}
	_ = root.RegisterFlagCompletionFunc("write-out", fixed("simple", "json"))
	_ = root.RegisterFlagCompletionFunc("log-level", fixed("debug", "info", "warn", "error"))
	for _, c := range root.Commands() {
		if nameArgs[c.Name()] {
			c.ValidArgsFunction = g.completeNames
		}
		if c.Flags().Lookup("kill-signal") != nil {
			_ = c.RegisterFlagCompletionFunc("kill-signal", fixed("TERM", "INT", "HUP", "QUIT", "KILL", "USR1", "USR2"))
		}
	}
}
