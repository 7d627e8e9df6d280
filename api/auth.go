package api

import (
	"crypto/subtle"
	"fmt"
	"net/http"
)

// authenticated reports whether r carries credentials a accepts: a client
// certificate the server's TLS verified, or the bearer token.
func (a Auth) authenticated(r *http.Request) bool {
	if a.ClientCerts && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return true
	}
	return a.Token != nil && bearer(r, a.Token)
}

// require lets a request through only if it is authenticated: with no
// credentials configured, never (403).
func (a Auth) require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case a.Token == nil && !a.ClientCerts:
			writeError(w, http.StatusForbidden, "this action needs authentication, and none is configured: start kira run with --http-token-file FILE (or KIRA_HTTP_TOKEN), or with --http-tls-cert, --http-tls-key and --http-client-ca")
		case a.authenticated(r):
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="kira"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong credentials: send Authorization: Bearer <token>, or a client certificate")
		}
	})
}

// Reads guards a read endpoint with the API's rule for reads: open by
// default, with ProtectReads the credentials write actions need. The
// member's /metrics is guarded with it too (TestWritesAreNeverOpen,
// TestMetricsNeedTheReadAuth in cmd/kira).
func (a Auth) Reads(next http.Handler) http.Handler {
	if !a.ProtectReads {
		return next
	}
	return a.require(next)
}

// bearer reports whether r carries token, compared in constant time.
func bearer(r *http.Request, token []byte) bool {
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) < len(prefix) || h[:len(prefix)] != prefix {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(h[len(prefix):]), token) == 1
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
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s %s refused: a browser sent it from another site (Origin %q, Sec-Fetch-Site %q); write from the dashboard this member serves, or from a client that sends neither header (curl, kira)",
			r.Method, r.URL.Path, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site")))
	}))
	return p.Handler(next)
}
