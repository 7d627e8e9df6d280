package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client calls one member's HTTP API. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	http      *http.Client
	token     string
	userAgent string
	retry     retryReads
}

// Option sets one of New's optional settings.
type Option func(*Client) error

// WithToken sends "Authorization: Bearer token" with every request: a
// token of the member's --http-token-file or --http-credentials.
func WithToken(token string) Option {
	return func(c *Client) error {
		if strings.ContainsAny(token, "\r\n") {
			return fmt.Errorf("client: WithToken: the token holds a line break (read from a file? trim it)")
		}
		c.token = token
		return nil
	}
}

// WithHTTPClient sends the requests through hc: its Transport's TLS
// config trusts the member's certificate and presents a client
// certificate (kira run --http-client-ca); its Timeout bounds each
// request. The default is a client of http.DefaultTransport without a
// timeout, bounded by each call's ctx.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return fmt.Errorf("client: WithHTTPClient(nil)")
		}
		c.http = hc
		return nil
	}
}

// WithUserAgent sends ua as the User-Agent of every request; the default
// is DefaultUserAgent.
func WithUserAgent(ua string) Option {
	return func(c *Client) error { c.userAgent = ua; return nil }
}

// DefaultUserAgent is the User-Agent a Client sends unless WithUserAgent
// says otherwise.
const DefaultUserAgent = "kira-client-go"

// New is a client of the member whose API is at baseURL, such as
// "https://kira-0.example.com:8080" (the address of kira run --http; a
// path, if any, is kept as the API's prefix). It makes no request.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: base URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http:// or https:// and a host, such as http://localhost:8080", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	c := &Client{base: u, http: &http.Client{}, userAgent: DefaultUserAgent}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// request is one call: its method, its path under the base URL (its
// segments already escaped), its query, body and headers.
type request struct {
	method string
	path   string
	query  url.Values
	body   []byte
	header http.Header
}

// response is a call's answer with a 2xx status.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends req and reads its answer: a status outside 2xx is an *Error.
// A GET is sent again on the terms of WithReadRetries; nothing else is.
func (c *Client) do(ctx context.Context, req request) (*response, error) {
	if req.method != http.MethodGet {
		return c.once(ctx, req)
	}
	return c.retry.do(ctx, func() (*response, error) { return c.once(ctx, req) })
}

// once sends req one time.
func (c *Client) once(ctx context.Context, req request) (*response, error) {
	u, err := url.Parse(c.base.String() + req.path) // req.path is escaped already
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", req.method, req.path, err)
	}
	u.RawQuery = req.query.Encode()
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", req.method, req.path, err)
	}
	for k, v := range req.header {
		hr.Header[k] = v
	}
	hr.Header.Set("Accept", "application/json")
	if c.userAgent != "" {
		hr.Header.Set("User-Agent", c.userAgent)
	}
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("client: %s %s: reading the answer: %w", req.method, req.path, err)
	case len(data) > maxAnswerBytes:
		return nil, fmt.Errorf("client: %s %s: the answer is over %d bytes", req.method, req.path, maxAnswerBytes)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, newError(req.method, req.path, resp.StatusCode, data)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

// maxAnswerBytes bounds an answer read into memory: a timeline of the
// largest page, or history at its limit, is well under it.
const maxAnswerBytes = 256 << 20

// call sends method of path with query and body, and decodes its answer
// as a T; the zero T with the error if it fails.
func call[T any](ctx context.Context, c *Client, method, path string, query url.Values, body []byte) (T, error) {
	var out T
	resp, err := c.do(ctx, request{method: method, path: path, query: query, body: body})
	if err != nil {
		return out, err
	}
	if err := decode(method, path, resp.body, &out); err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// decode reads an answer's JSON into out. Fields the client does not know
// are ignored, so a newer member's answers still decode.
func decode(method, path string, data []byte, out any) error {
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("client: %s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// jobPath is /v1/jobs/{job} and then the segments of more, each escaped.
func jobPath(job string, more ...string) string {
	p := "/v1/jobs/" + url.PathEscape(job)
	for _, m := range more {
		p += "/" + url.PathEscape(m)
	}
	return p
}
