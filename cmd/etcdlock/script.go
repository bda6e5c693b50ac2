package main

import (
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
