package api

import (
	"fmt"
	"net/http"
)

// maxAnonymousReads bounds the reads without credentials that one member
// serves at once. Each may cost etcd a status snapshot (every member and
// slot) or a history read, so an anonymous caller keeps at most this many
// going; the others are answered 429 at once, with Retry-After. Reads with
// credentials are not counted. Held by TestAnonymousReadsAreBounded.
const maxAnonymousReads = 8

// boundAnonymous serves next within the bound of maxAnonymousReads for a
// request without credentials.
func (s *server) boundAnonymous(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Auth.authenticated(r) {
			next.ServeHTTP(w, r)
			return
		}
		select {
		case s.anonymous <- struct{}{}:
			defer func() { <-s.anonymous }()
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, fmt.Sprintf("%d reads without credentials are in flight on this member, the most it serves at once: retry, or send credentials", maxAnonymousReads))
		}
	})
}
