package main

import (
	"github.com/spf13/cobra"
)

func newElectCommand(g *globalOptions) *cobra.Command {
	o := &runOptions{limit: 1} // leadership is a plain lock: elect has no --limit
	cmd := &cobra.Command{
		Use:   "elect [flags] NAME [--] COMMAND [ARGS...]",
		Short: "Run a command while this process is the elected leader",
		Long: `Campaign for leadership of NAME and run COMMAND while leader. Candidates are
served in the order they started campaigning; followers learn of a new leader
by watch, not by polling. The leader's identity is --owner.

COMMAND is handled exactly as by 'etcdlock run': it gets ETCDLOCK_TOKEN (the
term's fencing token) and the other ETCDLOCK_* variables, is killed with its
process group when leadership is lost (exit 79), and its exit ends the term
and hands leadership to the next candidate.`,
		Example: `  # one active controller among several replicas:
  etcdlock elect my-controller --owner "$(hostname)" -- ./controller --leader`,
		Args: commandArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			names, argv, _ := splitCommand(cmd, args)
			return runLocked(cmd.Context(), g, o, names, argv)
		},
	}
	o.bind(cmd, false)
	return cmd
}
