package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/kira-scheduler/kira/config"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The default clients of HTTP jobs and fence_url raises share one pool of
// connections. Under a recording span (tracing on, and sampled) a request
// goes through tracedClient: it is an HTTP client span (otelhttp), a child
// of the execution's or the raise's span, and its traceparent header names
// that client span (TestTracesReachAnOTLPReceiver). Otherwise through
// plainClient: the instrumentation would compute for nobody
// (docs/decisions/0038-no-otelhttp-without-a-recording-span.md),
// and the traceparent header names the execution's span.
var (
	pool         = pooledTransport()
	tracedClient = &http.Client{Transport: otelhttp.NewTransport(pool)}
	plainClient  = &http.Client{Transport: pool}
)

// defaultClient is the client for a request made under ctx.
func defaultClient(ctx context.Context) *http.Client {
	if trace.SpanFromContext(ctx).IsRecording() {
		return tracedClient
	}
	return plainClient
}

// pooledTransport is net/http's default transport keeping up to
// IdleConnsPerHost idle connections to each receiver instead of 2: a member
// whose slots of one job fire together sends that many requests to one host
// at once, and with 2 kept it dials all but 2 of them again at every fire,
// leaving a TIME_WAIT socket a request (docs/decisions/0037-idle-connections-per-receiver.md).
// Held by
// TestHTTPKeepsItsConnectionsForTheNextFire.
func pooledTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0 // no limit over all hosts; each is bounded below
	t.MaxIdleConnsPerHost = IdleConnsPerHost
	return t
}

// IdleConnsPerHost is how many idle connections to one receiver an HTTP
// job's client keeps; they close after 90 s unused.
const IdleConnsPerHost = 1024

// HTTP makes one request per execution; a 2xx answer is success, and a 409
// Conflict is taken as the protected resource fencing a stale token.
//
// The URL, headers and body may refer to the member's environment as
// ${NAME} (config.Expand); they are expanded for each request, and errors
// show the URL as the catalog wrote it, so a secret in it never reaches a
// history record. Held by TestHTTPExpandsReferencesAndHidesThem.
type HTTP struct {
	Spec config.HTTPSpec
	// Client defaults to defaultClient's; the execution's context bounds each request.
	Client *http.Client
	// LookupEnv reads the member's environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Execute sends the request with the execution's facts as headers.
func (h *HTTP) Execute(ctx context.Context, e Execution) Result {
	req, err := h.request(ctx)
	if err != nil {
		return Result{Outcome: Failed, Err: err}
	}
	e.SetHeaders(req.Header)
	// The execution's span is the parent of whatever the receiver traces.
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	client := h.Client
	if client == nil {
		client = defaultClient(ctx)
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = fmt.Errorf("jobs: %s %s: %w", h.Spec.Method, h.Spec.URL, ue.Err) // not ue's URL: it is expanded
		}
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

// request builds the execution's request, its references expanded.
func (h *HTTP) request(ctx context.Context) (*http.Request, error) {
	lookup := h.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	target, err := config.Expand(h.Spec.URL, lookup)
	if err != nil {
		return nil, fmt.Errorf("jobs: http.url: %w", err)
	}
	if u, err := url.Parse(target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("jobs: http.url %s is not an absolute http(s) URL once expanded", h.Spec.URL)
	}
	body, err := config.Expand(h.Spec.Body, lookup)
	if err != nil {
		return nil, fmt.Errorf("jobs: http.body: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, h.Spec.Method, target, strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("jobs: %s %s: cannot build the request", h.Spec.Method, h.Spec.URL)
	}
	for _, k := range slices.Sorted(maps.Keys(h.Spec.Headers)) {
		v, err := config.Expand(h.Spec.Headers[k], lookup)
		if err != nil {
			return nil, fmt.Errorf("jobs: http.headers.%s: %w", k, err)
		}
		req.Header.Set(k, v)
	}
	return req, nil
}
