//go:build gendocs

package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// extraCommands, in a build with -tags gendocs (`make release`), adds a
// hidden command that writes a man page per command into a directory.
func extraCommands() []*cobra.Command {
	return []*cobra.Command{{
		Use:    "gen-man DIR",
		Short:  "Write the man pages of every command into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true
			// No title: each page gets its command's (ETCDLOCK-RUN for etcdlock run).
			hdr := &doc.GenManHeader{Section: "1", Source: "etcdlock " + versionString(), Manual: "etcdlock manual"}
			// The pages' date: SOURCE_DATE_EPOCH when set, as reproducible
			// builds define it (make release sets the commit's time), so
			// that two builds of one commit give the same pages.
			if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
				sec, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return fmt.Errorf("SOURCE_DATE_EPOCH %q: not a number of seconds", v)
				}
				date := time.Unix(sec, 0).UTC()
				hdr.Date = &date
			}
			if err := doc.GenManTree(root, hdr, args[0]); err != nil {
				return fmt.Errorf("man pages: %w", err)
			}
			return nil
		},
	}}
}
