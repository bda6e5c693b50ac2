//go:build !gendocs

package main

import "github.com/spf13/cobra"

// extraCommands is empty in a normal build; see gendocs.go.
func extraCommands() []*cobra.Command { return nil }
