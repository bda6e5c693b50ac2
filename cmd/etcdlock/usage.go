package main

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Cobra answers a few usage mistakes with help and exit 0, or with an
// error that exits 1: an unknown command, an unknown help topic, an
// unknown shell for completion. They are usage errors (exit 64), as the
// exit-code table promises for a missing or bad argument.

// refuseUnknownCommands makes root refuse an unknown command with a usage
// error (with cobra's suggestions) and print its help without arguments;
// help and completion refuse an unknown topic or shell likewise.
func refuseUnknownCommands(root *cobra.Command) {
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		cmd.SuggestionsMinimumDistance = cmp.Or(cmd.SuggestionsMinimumDistance, 2) // cobra's own default
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return usageErr("%s", msg)
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }

	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			show := c.Run
			c.Run = nil
			c.RunE = func(c *cobra.Command, args []string) error {
				if found, rest, err := c.Root().Find(args); err != nil || found == nil || len(rest) > 0 {
					return usageErr("unknown help topic %q", strings.Join(args, " "))
				}
				show(c, args)
				return nil
			}
		case "completion":
			var shells []string
			for _, s := range c.Commands() {
				shells = append(shells, s.Name())
			}
			c.Use = "completion " + strings.Join(shells, "|")
			c.Args = func(_ *cobra.Command, args []string) error {
				if len(args) > 0 {
					return usageErr("completion: unknown shell %q; want one of %s", args[0], strings.Join(shells, ", "))
				}
				return nil
			}
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	}
}
