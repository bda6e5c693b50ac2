package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
)

// clearEnv unsets, for the test, every variable that applyEnv reads.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ETCDLOCK_") || k == "ETCDCTL_ENDPOINTS" {
			t.Setenv(k, "") // restored when t ends
			os.Unsetenv(k)
		}
	}
}

func TestEnvName(t *testing.T) {
	for flag, want := range map[string]string{
		"endpoints":       "ETCDLOCK_ENDPOINTS",
		"request-timeout": "ETCDLOCK_REQUEST_TIMEOUT",
		"write-out":       "ETCDLOCK_WRITE_OUT",
		"kill-signal":     "ETCDLOCK_KILL_SIGNAL",
		"key":             "ETCDLOCK_KEY_FILE", // ETCDLOCK_KEY is the lock key run gives its command
	} {
		if got := envName(flag); got != want {
			t.Errorf("envName(%q) = %q, want %q", flag, got, want)
		}
	}
}

func TestApplyEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string          // the command line after the command's name
		want    map[string]string // flag -> value after applyEnv
		wantErr string            // substring of a usage error
	}{
		{"env sets an unset flag", map[string]string{"ETCDLOCK_TTL": "5s"}, nil,
			map[string]string{"ttl": "5s"}, ""},
		{"flag wins over env", map[string]string{"ETCDLOCK_TTL": "5s"}, []string{"--ttl", "7s"},
			map[string]string{"ttl": "7s"}, ""},
		{"acquire's --owner is not read from ETCDLOCK_OWNER", map[string]string{"ETCDLOCK_OWNER": "env"}, nil,
			map[string]string{"owner": ""}, ""},
		{"flag at its default still wins", map[string]string{"ETCDLOCK_TTL": "5s"}, []string{"--ttl", "1m0s"},
			map[string]string{"ttl": "1m0s"}, ""},
		{"global flag", map[string]string{"ETCDLOCK_REQUEST_TIMEOUT": "2s"}, nil,
			map[string]string{"request-timeout": "2s", "ttl": "1m0s"}, ""},
		{"a renamed flag's old variable", map[string]string{"ETCDLOCK_COMMAND_TIMEOUT": "2s"}, nil,
			map[string]string{"request-timeout": "2s"}, ""},
		{"a renamed flag's old name wins over its new variable", map[string]string{"ETCDLOCK_REQUEST_TIMEOUT": "2s"}, []string{"--command-timeout", "3s"},
			map[string]string{"request-timeout": "3s"}, ""},
		{"no env keeps defaults", nil, nil,
			map[string]string{"owner": "", "ttl": "1m0s", "endpoints": "[127.0.0.1:2379]"}, ""},
		{"ETCDCTL_ENDPOINTS as fallback", map[string]string{"ETCDCTL_ENDPOINTS": "e1:2379,e2:2379"}, nil,
			map[string]string{"endpoints": "[e1:2379,e2:2379]"}, ""},
		{"ETCDLOCK_ENDPOINTS wins over ETCDCTL_ENDPOINTS", map[string]string{"ETCDCTL_ENDPOINTS": "ctl:2379", "ETCDLOCK_ENDPOINTS": "lock:2379"}, nil,
			map[string]string{"endpoints": "[lock:2379]"}, ""},
		{"--key reads ETCDLOCK_KEY_FILE", map[string]string{"ETCDLOCK_KEY_FILE": "/k.pem", "ETCDLOCK_KEY": "/locks/a/1"}, nil,
			map[string]string{"key": "/k.pem"}, ""},
		{"--key ignores ETCDLOCK_KEY", map[string]string{"ETCDLOCK_KEY": "/locks/a/1"}, nil,
			map[string]string{"key": ""}, ""},
		{"bad env value", map[string]string{"ETCDLOCK_TTL": "soon"}, nil, nil, `ETCDLOCK_TTL="soon"`},
		{"bad env value of a global flag", map[string]string{"ETCDLOCK_DIAL_TIMEOUT": "x"}, nil, nil, "ETCDLOCK_DIAL_TIMEOUT"},
		{"bad endpoints fallback names its variable", map[string]string{"ETCDCTL_ENDPOINTS": `"`}, nil, nil, "ETCDCTL_ENDPOINTS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			root := newRootCommand(&globalOptions{})
			cmd, _, err := root.Find([]string{"acquire"})
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.ParseFlags(tt.args); err != nil {
				t.Fatal(err)
			}
			err = applyEnv(cmd, nil)
			if tt.wantErr != "" {
				if err == nil || exitCode(err) != exitcode.Usage || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("applyEnv = %v (exit %d), want a usage error mentioning %q", err, exitCode(err), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("applyEnv: %v", err)
			}
			for flag, want := range tt.want {
				if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
					t.Errorf("--%s = %q, want %q", flag, got, want)
				}
			}
		})
	}
}

func TestChildEnv(t *testing.T) {
	tests := []struct {
		name string
		base []string
		ours map[string]string
		want []string // in any order
	}{
		{"ours added", []string{"PATH=/bin"}, map[string]string{"ETCDLOCK_TOKEN": "7"},
			[]string{"PATH=/bin", "ETCDLOCK_TOKEN=7"}},
		{"inherited value overridden", []string{"ETCDLOCK_TOKEN=3", "PATH=/bin"}, map[string]string{"ETCDLOCK_TOKEN": "7"},
			[]string{"PATH=/bin", "ETCDLOCK_TOKEN=7"}},
		{"every inherited copy removed", []string{"ETCDLOCK_TOKEN=1", "ETCDLOCK_TOKEN=2"}, map[string]string{"ETCDLOCK_TOKEN": "7"},
			[]string{"ETCDLOCK_TOKEN=7"}},
		{"names that only share a prefix kept", []string{"ETCDLOCK_TOKENS=x", "ETCDLOCK_TOKEN_FILE=y"}, map[string]string{"ETCDLOCK_TOKEN": "7"},
			[]string{"ETCDLOCK_TOKENS=x", "ETCDLOCK_TOKEN_FILE=y", "ETCDLOCK_TOKEN=7"}},
		{"empty value still overrides", []string{"ETCDLOCK_OWNER=old"}, map[string]string{"ETCDLOCK_OWNER": ""},
			[]string{"ETCDLOCK_OWNER="}},
		{"value with =", []string{"A=1"}, map[string]string{"ETCDLOCK_KEY": "/k=v"},
			[]string{"A=1", "ETCDLOCK_KEY=/k=v"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := childEnv(tt.base, tt.ours)
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Errorf("childEnv(%q, %v) = %q, want %q", tt.base, tt.ours, got, want)
			}
		})
	}
}
