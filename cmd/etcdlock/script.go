package main

import (
	"github.com/spf13/cobra"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// scriptArgs validates the NAME argument and --owner of the script commands.
func scriptArgs(name, owner string) error {
	if err := lock.ValidateName(name); err != nil {
		return usageErr("%v", err)
	}
	if owner == "" {
		return usageErr("--owner is required (or ETCDLOCK_OWNER): scripts identify themselves on every call")
	}
	return nil
}

func parseTokenFlag(s string) (fencing.Token, error) {
	if s == "" {
		return 0, usageErr("--token is required (or ETCDLOCK_TOKEN)")
	}
	t, err := fencing.ParseToken(s)
	if err != nil {
		return 0, usageErr("--token: %v", err)
	}
	return t, nil
}

// grantOptions are the flags by which renew and release name the grant
// that acquire printed.
type grantOptions struct{ owner, token string }

func (o *grantOptions) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.owner, "owner", "", "owner printed by acquire, ETCDLOCK_OWNER (required)")
	cmd.Flags().StringVar(&o.token, "token", "", "fencing token printed by acquire (required)")
}

// validate checks NAME, --owner and --token, and returns the token.
func (o *grantOptions) validate(name string) (fencing.Token, error) {
	if err := scriptArgs(name, o.owner); err != nil {
		return 0, err
	}
	return parseTokenFlag(o.token)
}
