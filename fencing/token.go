package fencing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Names under which a token travels outside the process. They are contracts
// with users' programs: do not rename them.
const (
	// EnvToken is the environment variable a command execution finds its token in.
	EnvToken = "KIRA_FENCING_TOKEN"
	// HeaderToken is the HTTP header an HTTP execution sends its token in.
	HeaderToken = "Kira-Fencing-Token"
)

// Token is a slot's fencing token: the etcd revision at which the current
// holder's election key was created. The zero Token is never issued.
type Token int64

// ErrInvalidToken is returned when a token's text is not a positive decimal revision.
var ErrInvalidToken = errors.New("fencing: invalid token")

// String renders the token as the decimal revision, the form used in the
// environment variable and header.
func (t Token) String() string { return strconv.FormatInt(int64(t), 10) }

// Valid reports whether t could have been issued by an election.
func (t Token) Valid() bool { return t > 0 }

// ParseToken reads a token in the decimal form String produces.
func ParseToken(s string) (Token, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: %q", ErrInvalidToken, s)
	}
	return Token(n), nil
}

type tokenKey struct{}

// WithToken returns a context that carries t, for code that runs on behalf of a slot.
func WithToken(ctx context.Context, t Token) context.Context {
	return context.WithValue(ctx, tokenKey{}, t)
}

// FromContext returns the token carried by ctx, and whether there was one.
func FromContext(ctx context.Context) (Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(Token)
	return t, ok
}
