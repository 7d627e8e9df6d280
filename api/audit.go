package api

import (
	"context"
	"log/slog"
	"net/http"
)

// auditRecord is what the write log says of one request, filled in while
// it is answered.
type auditRecord struct {
	caller  *Identity
	refused string
}

type auditKey struct{}

// noteCaller records who sent the request of ctx, for its log line.
func noteCaller(ctx context.Context, id Identity) {
	if rec, ok := ctx.Value(auditKey{}).(*auditRecord); ok {
		rec.caller = &id
	}
}

// noteRefused records why the request of ctx was refused, for its log line.
func noteRefused(ctx context.Context, why string) {
	if rec, ok := ctx.Value(auditKey{}).(*auditRecord); ok {
		rec.refused = why
	}
}

// isWrite reports whether method is one the API's writes use.
func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// audit logs each write request once it is answered, with who sent it
// (the caller, or none), its method, path and status: at INFO when it was
// let through, at WARN with why when it was refused (no or wrong
// credentials, another site, outside the caller's scope; a refusal a
// single-job write decided on a job its writer kept and then took back
// on the job as stored is not one: TestJobDefinitionOverAJobChangedElsewhere). Neither a
// header nor the query nor the body is logged, so no secret reaches the
// log (TestWritesAreLogged).
func audit(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isWrite(r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		rec := &auditRecord{}
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), auditKey{}, rec)))
		attrs := []any{"method", r.Method, "path", r.URL.Path, "status", sw.code}
		if rec.caller != nil {
			attrs = append(attrs, "caller", rec.caller.String())
		} else {
			attrs = append(attrs, "caller", "none")
		}
		if rec.refused != "" && sw.code >= http.StatusBadRequest {
			log.Warn("api write refused", append(attrs, "why", rec.refused)...)
			return
		}
		log.Info("api write", attrs...)
	})
}

// statusWriter keeps the status its handler answered with.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
