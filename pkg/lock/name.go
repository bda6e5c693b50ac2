package lock

import (
	"fmt"
	"strings"
)

// ValidateName reports whether name can be used as a lock name: it must be
// non-empty and must not contain NUL. Any other byte is allowed; '/' and
// '%' are escaped in the key (DESIGN.md, "Key layout and record").
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if strings.ContainsRune(name, 0) {
		return fmt.Errorf("%w: %q contains NUL", ErrInvalidName, name)
	}
	return nil
}
