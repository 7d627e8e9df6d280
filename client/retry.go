package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// A Client sends each request once by default. Writes are never sent
// again: an answer lost on the way back leaves a trigger, a pause or a
// catalog maybe applied, and sending it again would apply it twice (a
// PUT with IfRevision is the one write safe to repeat: the second is a
// 412 if the first applied; that is the caller's to decide). Reads may be
// sent again with WithReadRetries.

// WithReadRetries sends a read (GET) up to attempts times in all while it
// fails for a reason that may pass: no answer (the member is restarting,
// the network dropped), or 502, 503 or 504 (etcd did not answer the
// member in time). It waits backoff before the second attempt and twice
// as long before each next, up to 30 s, or until ctx ends; the last
// failure is returned (TestReadRetries).
func WithReadRetries(attempts int, backoff time.Duration) Option {
	return func(c *Client) error {
		if attempts < 1 || backoff <= 0 {
			return fmt.Errorf("client: WithReadRetries(%d, %s): want at least 1 attempt and a positive backoff", attempts, backoff)
		}
		c.retry = retryReads{attempts: attempts, backoff: backoff}
		return nil
	}
}

// maxBackoff bounds the wait between two attempts of a read.
const maxBackoff = 30 * time.Second

// retryReads is WithReadRetries' setting; the zero value sends once.
type retryReads struct {
	attempts int
	backoff  time.Duration
}

// do calls send until it succeeds, fails for good, or the attempts or ctx
// run out.
func (r retryReads) do(ctx context.Context, send func() (*response, error)) (*response, error) {
	wait := r.backoff
	for attempt := 1; ; attempt++ {
		resp, err := send()
		if err == nil || attempt >= r.attempts || !transient(err) || ctx.Err() != nil {
			return resp, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		wait = min(2*wait, maxBackoff)
	}
}

// transient reports whether err may pass: no answer, or a gateway's.
func transient(err error) bool {
	switch statusOf(err) {
	case 0, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}
