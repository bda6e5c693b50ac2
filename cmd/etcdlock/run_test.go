package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
)

func TestCommandArgs(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string // "" for valid
	}{
		{[]string{"a", "--", "true"}, ""},
		{[]string{"a", "--", "sh", "-c", "exit 3"}, ""},
		{[]string{"--ttl", "5s", "a", "--", "true"}, ""},
		{[]string{"a", "--ttl", "5s", "--", "true", "--ttl"}, ""},
		{nil, "missing lock NAME and COMMAND"},
		{[]string{"a"}, "missing COMMAND: use %s NAME -- COMMAND"},
		{[]string{"a", "true"}, "put COMMAND after --: %s NAME"},
		{[]string{"a", "b", "--", "true"}, "put COMMAND after --"}, // run: a set of names (below)
		{[]string{"a", "--"}, "missing COMMAND after --"},
		{[]string{"--", "true"}, "missing lock NAME before --"},
		{[]string{"", "--", "true"}, "invalid name"},
	}
	for _, newCmd := range []func(*globalOptions) *cobra.Command{newRunCommand, newElectCommand} {
		for _, tt := range tests {
			cmd := newCmd(&globalOptions{})
			t.Run(cmd.Name()+" "+strings.Join(tt.args, " "), func(t *testing.T) {
				if err := cmd.ParseFlags(tt.args); err != nil {
					t.Fatal(err)
				}
				err := cmd.Args(cmd, cmd.Flags().Args())
				if tt.wantErr == "" {
					if err != nil {
						t.Fatalf("commandArgs: %v", err)
					}
					return
				}
				if cmd.Name() == "run" && len(tt.args) == 4 && tt.args[1] == "b" {
					if err != nil {
						t.Fatalf("run with two names: %v", err)
					}
					return
				}
				want := strings.ReplaceAll(tt.wantErr, "%s", cmd.Name())
				if err == nil || exitCode(err) != exitcode.Usage || !strings.Contains(err.Error(), want) {
					t.Fatalf("commandArgs = %v (exit %d), want a usage error mentioning %q", err, exitCode(err), want)
				}
			})
		}
	}
}

func TestRunNamesArgs(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"a", "b", "c", "--", "true"}, ""},
		{[]string{"a", "b", "a", "--", "true"}, "given twice"},
		{[]string{"a", "", "--", "true"}, "invalid name"},
		{[]string{"a", "b", "--"}, "missing COMMAND after --"},
	} {
		cmd := newRunCommand(&globalOptions{})
		if err := cmd.ParseFlags(tt.args); err != nil {
			t.Fatal(err)
		}
		err := cmd.Args(cmd, cmd.Flags().Args())
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("run %v: %v, want %q", tt.args, err, tt.wantErr)
		}
	}
}
