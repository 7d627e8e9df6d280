// Package notify tells people about executions: for each execution whose
// final outcome a notify rule of its job names, the slot's owner POSTs one
// JSON document (Message) to the rule's webhook, with the execution id as
// Idempotency-Key, retried with backoff within a bounded time.
//
// Delivery never delays a fire: Notify only queues, and its own goroutines
// send. A message that cannot be delivered (the receiver keeps failing, the
// deadline passes, the queue is full, the member stops) is reported through
// Config.OnResult and logged, never dropped silently. Held by the tests of
// this package, against real HTTP receivers (slow, failing, refusing).
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
)

// Message is the document a webhook receives: the execution's history
// record (every field always present), its cluster, and a link to it in
// the API ("" when the member serves no API).
type Message struct {
	history.Record
	Cluster string `json:"cluster"`
	Link    string `json:"link"`
}

// Defaults of Config.
const (
	DefaultAttemptTimeout = 10 * time.Second
	DefaultDeadline       = 2 * time.Minute
	DefaultQueue          = 1024
	DefaultWorkers        = 4
	DefaultBackoff        = time.Second
	maxBackoff            = 30 * time.Second
)

// Result is how a delivery ended.
type Result struct {
	Job       string
	Partition int
	Webhook   string // as the catalog wrote it: a secret in a ${NAME} stays hidden
	Err       error  // nil: delivered (a 2xx answer)
	// Attempts made (0 when the message never left the queue).
	Attempts int
}

// Config says how to deliver. Every field has a default.
type Config struct {
	Client *http.Client
	// LookupEnv expands the ${NAME} references of webhooks and headers; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	Logger    *slog.Logger
	// AttemptTimeout bounds one request; Deadline bounds all of a message's
	// attempts; Backoff is the first pause between attempts (it doubles, up
	// to 30 s, with jitter).
	AttemptTimeout, Deadline, Backoff time.Duration
	Queue, Workers                    int
	// OnResult, if set, is called once per message and webhook, from the
	// notifier's goroutines.
	OnResult func(Result)
}

// Notifier queues messages and delivers them. Run owns its goroutines.
type Notifier struct {
	cfg     Config
	queue   chan delivery
	pending atomic.Int64 // queued or being sent
}

type delivery struct {
	rule config.NotifyRule
	msg  Message
}

// New returns a notifier; nothing is sent until Run.
func New(cfg Config) *Notifier {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: otelhttp.NewTransport(http.DefaultTransport)}
	}
	if cfg.LookupEnv == nil {
		cfg.LookupEnv = os.LookupEnv
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.AttemptTimeout = orDefault(cfg.AttemptTimeout, DefaultAttemptTimeout)
	cfg.Deadline = orDefault(cfg.Deadline, DefaultDeadline)
	cfg.Backoff = orDefault(cfg.Backoff, DefaultBackoff)
	cfg.Queue = orDefault(cfg.Queue, DefaultQueue)
	cfg.Workers = orDefault(cfg.Workers, DefaultWorkers)
	return &Notifier{cfg: cfg, queue: make(chan delivery, cfg.Queue)}
}

func orDefault[T time.Duration | int](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Notify queues m for every rule that names its outcome; it never blocks.
func (n *Notifier) Notify(rules []config.NotifyRule, m Message) {
	for _, r := range rules {
		if !slices.Contains(r.On, m.Outcome) {
			continue
		}
		n.pending.Add(1)
		select {
		case n.queue <- delivery{rule: r, msg: m}:
		default:
			n.done(delivery{rule: r, msg: m}, 0, fmt.Errorf("notify: the queue of %d messages is full", n.cfg.Queue))
		}
	}
}

// Run delivers until ctx ends; then what is still queued is reported
// undelivered, and Run returns once the messages being sent have ended.
func (n *Notifier) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range n.cfg.Workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case d := <-n.queue:
					n.deliver(ctx, d)
				}
			}
		})
	}
	wg.Wait()
	for {
		select {
		case d := <-n.queue:
			n.done(d, 0, errors.New("notify: the member stopped before it was sent"))
		default:
			return
		}
	}
}

// deliver sends d until a 2xx answer, a refusal no retry can cure (a 4xx
// other than 408 and 429), or the deadline.
func (n *Notifier) deliver(ctx context.Context, d delivery) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Deadline)
	defer cancel()
	body, err := json.Marshal(d.msg)
	if err != nil {
		n.done(d, 0, err)
		return
	}
	wait := n.cfg.Backoff
	for attempt := 1; ; attempt++ {
		retry, err := n.post(ctx, d, body)
		if err == nil || !retry {
			n.done(d, attempt, err)
			return
		}
		pause := wait/2 + rand.N(wait/2+1)
		select {
		case <-ctx.Done():
			n.done(d, attempt, fmt.Errorf("%w (gave up after %d attempts: %v)", err, attempt, context.Cause(ctx)))
			return
		case <-time.After(pause):
		}
		wait = min(2*wait, maxBackoff)
	}
}

// post makes one attempt; retry says whether another may succeed.
func (n *Notifier) post(ctx context.Context, d delivery, body []byte) (retry bool, err error) {
	url, err := config.Expand(d.rule.Webhook, n.cfg.LookupEnv)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("notify: webhook %s: %v", d.rule.Webhook, err)
	}
	for name, value := range d.rule.Headers {
		v, err := config.Expand(value, n.cfg.LookupEnv)
		if err != nil {
			return false, err
		}
		req.Header.Set(name, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", d.msg.ExecutionID)
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		return true, fmt.Errorf("notify: webhook %s: %v", d.rule.Webhook, errors.Unwrap(err)) // not err: its URL is expanded
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return false, nil
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return true, fmt.Errorf("notify: webhook %s: %s", d.rule.Webhook, resp.Status)
	default:
		return false, fmt.Errorf("notify: webhook %s: %s (not retried)", d.rule.Webhook, resp.Status)
	}
}

// Flush waits until every queued message has been delivered or given up,
// or ctx ends.
func (n *Notifier) Flush(ctx context.Context) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for n.pending.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// done reports a message's end.
func (n *Notifier) done(d delivery, attempts int, err error) {
	defer n.pending.Add(-1)
	if err != nil {
		n.cfg.Logger.Warn("notification not delivered", "job", d.msg.Job, "partition", d.msg.Partition, "execution_id", d.msg.ExecutionID,
			"outcome", d.msg.Outcome, "webhook", d.rule.Webhook, "attempts", attempts, "err", err)
	}
	if n.cfg.OnResult != nil {
		n.cfg.OnResult(Result{Job: d.msg.Job, Partition: d.msg.Partition, Webhook: d.rule.Webhook, Err: err, Attempts: attempts})
	}
}
