package api

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
)

// identify is the identity r's credentials prove, if any: a bearer token a
// accepts, else a client certificate the server's TLS verified (listed, or
// unlisted when the credentials file lets those in).
func (a Auth) identify(r *http.Request) (Identity, bool) {
	if token, ok := bearer(r); ok {
		if id, ok := a.tokenIdentity(token); ok {
			return id, true
		}
	}
	if !a.ClientCerts || r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return Identity{}, false
	}
	subject := r.TLS.VerifiedChains[0][0].Subject.String()
	id := Identity{Name: subject, Certificate: true}
	if a.Credentials == nil {
		return id, true
	}
	key, err := canonicalSubject(subject)
	if err != nil {
		return Identity{}, false
	}
	s, listed := a.Credentials.certs[key]
	if !listed && a.Credentials.refuseUnlisted {
		return Identity{}, false
	}
	id.scope = s
	return id, true
}

// unlisted is the subject of r's verified client certificate when the
// credentials file does not list it and refuses such certificates.
func (a Auth) unlisted(r *http.Request) (string, bool) {
	if !a.ClientCerts || a.Credentials == nil || !a.Credentials.refuseUnlisted || r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return "", false
	}
	subject := r.TLS.VerifiedChains[0][0].Subject.String()
	key, err := canonicalSubject(subject)
	_, listed := a.Credentials.certs[key]
	return subject, err != nil || !listed
}

// tokenIdentity is the token whose secret is token. Every secret is
// compared, in constant time, whichever matches.
func (a Auth) tokenIdentity(token []byte) (Identity, bool) {
	var id Identity
	found := 0
	if a.Token != nil && subtle.ConstantTimeCompare(token, a.Token) == 1 {
		id, found = Identity{Name: LegacyTokenName}, 1
	}
	if a.Credentials != nil {
		for _, t := range a.Credentials.tokens {
			if subtle.ConstantTimeCompare(token, t.secret) == 1 {
				id, found = Identity{Name: t.name, scope: t.scope}, found+1
			}
		}
	}
	return id, found == 1
}

// configured reports whether a accepts any credentials at all.
func (a Auth) configured() bool {
	return a.Token != nil || a.ClientCerts || (a.Credentials != nil && len(a.Credentials.tokens) > 0)
}

// authenticated reports whether r carries credentials a accepts.
func (a Auth) authenticated(r *http.Request) bool {
	_, ok := a.identify(r)
	return ok
}

// require lets a request through only if it is authenticated, with its
// identity in its context (Caller): with no credentials configured, never
// (403).
func (a Auth) require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.configured() {
			noteRefused(r.Context(), "no credentials are configured")
			writeError(w, http.StatusForbidden, "this action needs authentication, and none is configured: start kira run with --http-credentials FILE, --http-token-file FILE (or KIRA_HTTP_TOKEN), or with --http-tls-cert, --http-tls-key and --http-client-ca")
			return
		}
		id, ok := a.identify(r)
		if subject, unlisted := a.unlisted(r); !ok && unlisted {
			msg := fmt.Sprintf("certificate %q is not listed in the credentials file, and it refuses certificates not listed (unlisted_certificates: refused)", subject)
			noteRefused(r.Context(), msg)
			writeError(w, http.StatusForbidden, msg)
			return
		}
		if !ok {
			noteRefused(r.Context(), "missing or wrong credentials")
			w.Header().Set("WWW-Authenticate", `Bearer realm="kira"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong credentials: send Authorization: Bearer <token>, or a client certificate")
			return
		}
		noteCaller(r.Context(), id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, id)))
	})
}

// Reads guards a read endpoint with the API's rule for reads: open by
// default, with ProtectReads the credentials write actions need, any
// scope. The member's /metrics is guarded with it too
// (TestWritesAreNeverOpen, TestMetricsNeedTheReadAuth in cmd/kira).
func (a Auth) Reads(next http.Handler) http.Handler {
	if !a.ProtectReads {
		return next
	}
	return a.require(next)
}

// Check says what is wrong with a's credentials together: a credentials
// file's token with the secret of --http-token-file's, or certificates
// listed where no client certificate can arrive.
func (a Auth) Check() error {
	c := a.Credentials
	if c == nil {
		return nil
	}
	for _, t := range c.tokens {
		if a.Token != nil && subtle.ConstantTimeCompare(t.secret, a.Token) == 1 {
			return fmt.Errorf("%s: token %q has the same secret as --http-token-file's (KIRA_HTTP_TOKEN): give each its own", t.at, t.name)
		}
	}
	if (len(c.certs) > 0 || c.refuseUnlisted) && !a.ClientCerts {
		return fmt.Errorf("%s: certificates are listed (or unlisted_certificates set), but no client certificate is verified: add --http-client-ca, with --http-tls-cert and --http-tls-key", c.file)
	}
	return nil
}

// bearer is r's bearer token, if it sends one.
func bearer(r *http.Request) ([]byte, bool) {
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) < len(prefix) || h[:len(prefix)] != prefix {
		return nil, false
	}
	return []byte(h[len(prefix):]), true
}

// sameSite refuses (403) a write (POST, PUT, PATCH, DELETE) a browser sends
// from another site: its Sec-Fetch-Site says cross-site or same-site, or,
// without one, its Origin is not this server's host. A browser holding an
// operator's client certificate presents it on a cross-site form POST, so
// credentials alone do not show the operator meant it. A request with
// neither header (curl, kira) passes, as do reads
// (TestCrossSiteWritesAreRefused).
func sameSite(next http.Handler) http.Handler {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noteRefused(r.Context(), "a browser sent it from another site")
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s %s refused: a browser sent it from another site (Origin %q, Sec-Fetch-Site %q); write from the dashboard this member serves, or from a client that sends neither header (curl, kira)",
			r.Method, r.URL.Path, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site")))
	}))
	return p.Handler(next)
}
