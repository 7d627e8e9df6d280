package jobs

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/kira-scheduler/kira/config"
)

// HTTP makes one request per execution; a 2xx answer is success, and a 409
// Conflict is taken as the protected resource fencing a stale token.
type HTTP struct {
	Spec config.HTTPSpec
	// Client defaults to http.DefaultClient; the execution's context bounds each request.
	Client *http.Client
}

// Execute sends the request with the execution's facts as headers.
func (h *HTTP) Execute(ctx context.Context, e Execution) Result {
	req, err := http.NewRequestWithContext(ctx, h.Spec.Method, h.Spec.URL, strings.NewReader(h.Spec.Body))
	if err != nil {
		return Result{Outcome: Failed, Err: err}
	}
	for k, v := range h.Spec.Headers {
		req.Header.Set(k, v)
	}
	e.SetHeaders(req.Header)
	client := h.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if o, ok := endedBy(ctx); ok {
			return Result{Outcome: o, Err: err}
		}
		return Result{Outcome: Failed, Err: err}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if len(body) > OutputTailBytes {
		body = body[len(body)-OutputTailBytes:]
	}
	res := Result{Code: resp.StatusCode, OutputTail: string(body)}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		res.Outcome = Succeeded
	case resp.StatusCode == http.StatusConflict:
		res.Outcome = Fenced
		res.Err = fmt.Errorf("jobs: %s %s: fenced (409)", h.Spec.Method, h.Spec.URL)
	default:
		res.Outcome = Failed
		res.Err = fmt.Errorf("jobs: %s %s: %s", h.Spec.Method, h.Spec.URL, resp.Status)
	}
	return res
}
