package fencing

import (
	"errors"
	"fmt"
	"strconv"
)

// Token is a fencing token: the etcd revision at which the lock owner's key was
// created. Valid tokens are positive; the zero Token means "no token".
//
// Tokens of successive owners of one lock name strictly increase. Tokens of
// different lock names are comparable (they share etcd's revision counter) but
// carry no meaning across names.
type Token int64

const (
	// EnvVar is the environment variable that carries a token to a child
	// process, in its text form.
	EnvVar = "ETCDLOCK_TOKEN"
	// Header is the HTTP header that carries a token with a request.
	Header = "Fencing-Token"
)

// ErrInvalidToken is returned (wrapped) by ParseToken for text that is not a
// valid token.
var ErrInvalidToken = errors.New("fencing: invalid token")

// IsValid reports whether t could have been issued by etcdlock (t > 0).
func (t Token) IsValid() bool { return t > 0 }

// String returns the decimal text form of t, the form ParseToken accepts.
func (t Token) String() string { return strconv.FormatInt(int64(t), 10) }

// MarshalText implements encoding.TextMarshaler with the decimal form.
func (t Token) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseToken's
// rules, and reads "0" as the zero Token ("no token"), so that what
// MarshalText writes of a valid or zero Token reads back.
func (t *Token) UnmarshalText(b []byte) error {
	if string(b) == "0" {
		*t = 0
		return nil
	}
	v, err := ParseToken(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// ParseToken parses the decimal text form of a token, the form String
// writes: a plain positive decimal number (no sign, spaces, base prefix or
// leading zero) that fits in an int64. Anything else returns an error
// wrapping ErrInvalidToken, so that a token has one spelling.
func ParseToken(s string) (Token, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: empty", ErrInvalidToken)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: %q is not a positive decimal number", ErrInvalidToken, s)
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%w: %q has a leading zero", ErrInvalidToken, s)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is out of range", ErrInvalidToken, s)
	}
	if v == 0 {
		return 0, fmt.Errorf("%w: 0 is not a token", ErrInvalidToken)
	}
	return Token(v), nil
}
