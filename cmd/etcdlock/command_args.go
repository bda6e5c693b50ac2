package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// How run and elect split their arguments into lock names and a command:
//
//	run [flags] NAME COMMAND [ARGS...]          as flock: no "--" needed
//	run NAME [NAME...] [flags] -- COMMAND [ARGS...]
//	run [flags] -- NAME [NAME... --] COMMAND [ARGS...]   names may start with "-"
//
// A command line with a "--" is read the explicit way: the first "--"
// ends the names (so a COMMAND whose arguments hold a "--" needs one
// before it). Without any "--", the first argument is the one NAME and
// COMMAND starts at the next: implicitDash puts a "--" there before the
// flags are parsed, so that COMMAND's own flags (ls -l) are not taken for
// etcdlock's.

// commandLine is args as the commands parse them: with implicitDash, also
// in a shell completion request (__complete WORD... TOCOMPLETE), whose
// words up to the one being completed are read as the command line would
// be, so that COMMAND's arguments, its flags too, complete as a shell
// command's and not as etcdlock's flags.
func commandLine(root *cobra.Command, args []string) []string {
	i := slices.IndexFunc(args, func(a string) bool { return a == cobra.ShellCompRequestCmd || a == cobra.ShellCompNoDescRequestCmd })
	if i < 0 || i == len(args)-1 {
		return implicitDash(root, args)
	}
	// Flags before the request are the completed command line's too.
	words, last := slices.Concat(args[:i], args[i+1:len(args)-1]), args[len(args)-1]
	return slices.Concat(args[i:i+1], implicitDash(root, words), []string{last})
}

// implicitDash returns args with "--" inserted before the command of a
// run or elect without "--"; args as they are otherwise.
func implicitDash(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd.Parent() != root || cmd.Name() != "run" && cmd.Name() != "elect" || slices.Contains(args, "--") {
		return args
	}
	positional := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "-") && len(a) > 1:
			if takesValue(cmd, a) {
				i++
			}
			continue
		}
		// The command's name, NAME, then COMMAND.
		if positional++; positional == 3 {
			return slices.Concat(args[:i], []string{"--"}, args[i:])
		}
	}
	return args
}

// takesValue reports whether the flag argument a ("--ttl", "-w") takes
// the next argument as its value. An unknown flag is left to the parser,
// which rejects it.
func takesValue(cmd *cobra.Command, a string) bool {
	if strings.Contains(a, "=") {
		return false
	}
	var name, short string
	if n, ok := strings.CutPrefix(a, "--"); ok {
		name = n
	} else if len(a) == 2 {
		short = a[1:]
	} else {
		return false // -qE3: shorthands with the value attached
	}
	f := cmd.Flags().Lookup(name)
	if f == nil {
		f = cmd.InheritedFlags().Lookup(name)
	}
	if short != "" {
		f = cmd.Flags().ShorthandLookup(short)
		if f == nil {
			f = cmd.InheritedFlags().ShorthandLookup(short)
		}
	}
	return f != nil && f.NoOptDefVal == ""
}

// splitCommand splits run's or elect's arguments, after the flags were
// parsed, into names and the command.
func splitCommand(cmd *cobra.Command, args []string) (names, argv []string, err error) {
	dash := cmd.ArgsLenAtDash()
	switch {
	case dash > 0:
		names, argv = args[:dash], args[dash:]
	case dash == 0 && slices.Contains(args, "--"):
		// -- NAME [NAME...] -- COMMAND
		i := slices.Index(args, "--")
		names, argv = args[:i], args[i+1:]
	case len(args) > 0:
		// -- NAME COMMAND, or NAME COMMAND as parsed without implicitDash
		names, argv = args[:1], args[1:]
	}
	switch {
	case len(names) == 0:
		return nil, nil, usageErr("missing lock NAME: use %s NAME COMMAND [ARGS...]", cmd.Name())
	case len(argv) == 0:
		return nil, nil, usageErr("missing COMMAND: use %s NAME COMMAND [ARGS...]", cmd.Name())
	case len(names) > 1 && cmd.Name() != "run":
		return nil, nil, usageErr("%s takes one NAME", cmd.Name())
	case len(names) > lock.MaxNames:
		return nil, nil, usageErr("%d names: at most %d", len(names), lock.MaxNames)
	}
	seen := map[string]bool{}
	for _, name := range names {
		if err := lock.ValidateName(name); err != nil {
			return nil, nil, err
		}
		if seen[name] {
			return nil, nil, usageErr("name %q given twice", name)
		}
		if strings.Contains(name, "\n") && len(names) > 1 {
			return nil, nil, usageErr("name %q contains a newline, which ETCDLOCK_NAMES cannot list", name)
		}
		seen[name] = true
	}
	return names, argv, nil
}

// commandArgs is run's and elect's argument check.
func commandArgs(cmd *cobra.Command, args []string) error {
	_, _, err := splitCommand(cmd, args)
	return err
}
