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
	// EnvLeaderKey is the environment variable holding the slot's election leader key.
	EnvLeaderKey = "KIRA_LEADER_KEY"
)

// Token is a slot's fencing token: the etcd revision at which the current
// holder's election key was created. The zero Token is never issued.
type Token int64

// ErrInvalidToken is returned when a token's text is not a positive decimal revision.
var ErrInvalidToken = errors.New("fencing: invalid token")

// ErrFenced is returned by every guard when a write is refused because a newer
// holder's token has been seen (or the claim's leader key is gone). Handlers
// return it, wrapped or not, to have their execution recorded as fenced.
var ErrFenced = errors.New("fencing: fenced: a newer leader holds the slot")

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

// Claim is what an execution holds on its slot: the etcd key of the election
// leader it was started under, and that key's create revision (the token).
type Claim struct {
	LeaderKey string
	Token     Token
}

type claimKey struct{}

// WithClaim returns a context that carries c, for code that runs on behalf of a slot.
func WithClaim(ctx context.Context, c Claim) context.Context {
	return context.WithValue(ctx, claimKey{}, c)
}

// ClaimFromContext returns the claim carried by ctx, and whether there was one.
func ClaimFromContext(ctx context.Context) (Claim, bool) {
	c, ok := ctx.Value(claimKey{}).(Claim)
	return c, ok
}

// WithToken returns a context that carries a claim with token t and no leader key.
func WithToken(ctx context.Context, t Token) context.Context {
	return WithClaim(ctx, Claim{Token: t})
}

// FromContext returns the token carried by ctx, and whether there was one.
func FromContext(ctx context.Context) (Token, bool) {
	c, ok := ClaimFromContext(ctx)
	return c.Token, ok
}
