package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/kira-scheduler/kira/api"
)

// Error is an answer with a status outside 2xx. Message is the API's
// "error" (or, when the body is not the API's JSON, the status and the
// start of the body: a proxy in between answered).
type Error struct {
	// Method and Path are the request's.
	Method, Path string
	StatusCode   int
	Message      string
	// Body is the answer's body as it came.
	Body []byte
	// Revision and Differs are a 412's (IsPreconditionFailed): the job's
	// revision now (0: it is not stored) and what changed since the
	// revision the request named.
	Revision int64
	Differs  []string
	// Problems are a 422's: every problem of the job or catalog refused,
	// with its line, column and field.
	Problems []api.Problem
}

func (e *Error) Error() string {
	return fmt.Sprintf("kira: %s %s: %d %s: %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// errorBody is every field an error answer may have: api.Error's, a 412's
// (api.JobPreconditionFailed) and a 422's (api.CatalogRefused).
type errorBody struct {
	Error    *string       `json:"error"`
	Revision int64         `json:"revision"`
	Differs  []string      `json:"differs"`
	Problems []api.Problem `json:"problems"`
}

// newError is the *Error of an answer with status code and body data.
func newError(method, path string, code int, data []byte) *Error {
	e := &Error{Method: method, Path: path, StatusCode: code, Body: data}
	var b errorBody
	if json.Unmarshal(data, &b) == nil && b.Error != nil {
		e.Message, e.Revision, e.Differs, e.Problems = *b.Error, b.Revision, b.Differs, b.Problems
		return e
	}
	text := strings.TrimSpace(string(data))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	if text == "" {
		text = "(no body)"
	}
	e.Message = "not the API's answer: " + text
	return e
}

// statusOf is err's status code if it is an *Error, else 0.
func statusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// IsNotFound reports whether err is a 404: no such job, execution or
// stored catalog.
func IsNotFound(err error) bool { return statusOf(err) == http.StatusNotFound }

// IsConflict reports whether err is a 409: another manager holds the job,
// jobs run after the one deleted, the catalog changed since it was read,
// or a run to cancel is not waiting.
func IsConflict(err error) bool { return statusOf(err) == http.StatusConflict }

// IsPreconditionFailed reports whether err is a 412: the job is not at
// the revision IfRevision named, or CreateOnly found it stored. The
// *Error's Revision and Differs say what it is now.
func IsPreconditionFailed(err error) bool { return statusOf(err) == http.StatusPreconditionFailed }

// IsForbidden reports whether err is a 403: the caller's scope does not
// allow it, the member has no credentials configured, or the request
// came from another site.
func IsForbidden(err error) bool { return statusOf(err) == http.StatusForbidden }

// IsUnauthorized reports whether err is a 401: no credentials, or wrong
// ones.
func IsUnauthorized(err error) bool { return statusOf(err) == http.StatusUnauthorized }

// IsInvalid reports whether err is a 422 (the job or catalog is invalid:
// the *Error's Problems locate each problem) or a 400 (a malformed
// request).
func IsInvalid(err error) bool {
	s := statusOf(err)
	return s == http.StatusUnprocessableEntity || s == http.StatusBadRequest
}
