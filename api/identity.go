package api

import (
	"context"
	"strconv"
)

// Identity is who sent a request: the name of its bearer token, or the
// subject of its client certificate. Its scope limits what it may write
// (allowJob); with none it may do everything.
type Identity struct {
	// Name is the token's name (LegacyTokenName for --http-token-file's),
	// or the certificate's subject as Go prints it (CN=deployer,O=Acme).
	Name string
	// Certificate says Name is a certificate subject, not a token name.
	Certificate bool
	scope       *scope
}

// Scoped reports whether the identity's scope limits it.
func (id Identity) Scoped() bool { return id.scope != nil }

// Manager is the identity as the catalog records who wrote a job:
// "api:" and its name.
func (id Identity) Manager() string { return "api:" + id.Name }

// String is the identity as messages and the log name it: token "name",
// or certificate "subject".
func (id Identity) String() string {
	if id.Certificate {
		return "certificate " + strconv.Quote(id.Name)
	}
	return "token " + strconv.Quote(id.Name)
}

type callerKey struct{}

// Caller is the identity that sent the request ctx belongs to; false for a
// request without credentials (an anonymous read). Every write route's
// context has one (TestCallerIsInTheContext).
func Caller(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(callerKey{}).(Identity)
	return id, ok
}
