// Package api is the HTTP API every member serves (kira run --http): JSON
// under /v1, answered for the whole cluster from etcd through package
// operator, so any member answers the same.
//
//	GET  /v1/status                                   the cluster's members, slots and catalog source (kira status -o json)
//	GET  /v1/jobs                                     every job: schedule, paused, slots led, last and next fire
//	GET  /v1/jobs/{job}                               one job: its spec, each slot's owner, token and last fire, its next fires
//	GET  /v1/jobs/{job}/definition?format=            the job as stored, its revision (ETag) and manager (jobdef.go)
//	PUT  /v1/jobs/{job}?force=                        create or replace the job from one catalog entry; If-Match, If-None-Match: *
//	DELETE /v1/jobs/{job}?force=                      delete the job; If-Match
//	GET  /v1/jobs/{job}/executions?partition=&limit=&outcome=  recent executions, newest first (kira history -o json)
//	GET  /v1/jobs/{job}/executions/{id}               one execution (the link in a notification)
//	POST /v1/jobs/{job}/trigger?partition=&at=&in=&cascade=
//	                                                  one run now (or at a time) of each slot, or one partition; cascade=true: its dependents after it
//	DELETE /v1/jobs/{job}/trigger/{id}                cancel a waiting run, unless it has started (409)
//	POST /v1/jobs/{job}/pause                         stop scheduled fires on every member
//	POST /v1/jobs/{job}/resume
//	PUT  /v1/catalog?dry_run=&force=                  store the catalog YAML of the body, as kira apply -f does
//	GET  /v1/timeline?since=&bucket=&job=&offset=&limit=  executions and holders over time, per slot or per time bucket (ops.Timeline)
//	GET  /v1/health                                   what is wrong and what to do (ops.Health, etcd's alarms)
//	GET  /v1/members                                  each live member: slots led, labels, version, lease (ops.ReadMembers)
//
// Write actions need authentication (Auth): a bearer token compared in
// constant time, or a client certificate verified by the server's TLS. With
// neither configured they are refused (403), never open. The caller's
// identity, a token's name or a certificate's subject, is in the request's
// context (Caller). A credential with a scope (a credentials file,
// LoadCredentials) may act only on the jobs its names and labels select,
// with the verbs it lists, and never replace the whole catalog: outside
// its scope a write is refused (403) naming the caller and what it lacks
// (authorize, allowJob). Every write is logged with its caller (audit).
// A write a browser sends from another site is refused (403) whatever its
// credentials (sameSite). An anonymous reader sees a job's spec with its secrets
// redacted (redactSpec). Errors are JSON: {"error": "…"} with a 4xx or 5xx
// status.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/klauspost/compress/gzhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// MaxBodyBytes bounds a request's body, but PUT /v1/catalog's: none of the
// other endpoints needs one.
const MaxBodyBytes = 64 << 10

// requestTimeout bounds the etcd work of one request.
const requestTimeout = 10 * time.Second

// Auth says who may do what.
type Auth struct {
	// Token, if set, lets a request that says "Authorization: Bearer
	// <Token>" do every write: the unscoped token named LegacyTokenName
	// (kira run --http-token-file).
	Token []byte
	// ClientCerts lets a request write when it came over TLS with a
	// client certificate the server verified (its tls.Config requires and
	// verifies them against a CA: kira run --http-client-ca). Unless
	// Credentials lists the certificate's subject or refuses unlisted
	// ones, it is unscoped.
	ClientCerts bool
	// Credentials, if set, are named tokens and certificate subjects, each
	// with its scope (kira run --http-credentials).
	Credentials *Credentials
	// ProtectReads applies the same rule to the read endpoints; by default
	// they are open.
	ProtectReads bool
}

// Config is what the API needs.
type Config struct {
	KV      clientv3.KV
	Cluster string
	Auth    Auth
	// Leases, if set, answers the members' lease countdowns
	// (GET /v1/members); without it they are null.
	Leases clientv3.Lease
	// Maintenance, if set, answers etcd's raised alarms, which
	// GET /v1/health lists; without it none are.
	Maintenance clientv3.Maintenance
	// Peers, if set, reads the other members' /metrics over plain HTTP, so
	// GET /v1/health names a slot two members each say they lead
	// (ops.ReadClaims); without it that is not checked.
	Peers *http.Client
	// Logger, if set, gets a line for every write request: who sent it,
	// what, and its status or why it was refused (audit); without it none.
	Logger *slog.Logger
}

// route is one endpoint: its pattern (as http.ServeMux reads it), the
// verb a caller's scope needs for it ("" for a read), its handler, and the
// limit of its body (0: MaxBodyBytes).
type route struct {
	pattern string
	verb    verb
	handle  func(*server) handler
	body    int64
}

var routes = []route{
	{"GET /v1/status", "", func(s *server) handler { return s.status }, 0},
	{"GET /v1/jobs", "", func(s *server) handler { return s.jobs }, 0},
	{"GET /v1/jobs/{job}", "", func(s *server) handler { return s.jobDetail }, 0},
	{"GET /v1/jobs/{job}/definition", "", func(s *server) handler { return s.definition }, 0},
	{"PUT /v1/jobs/{job}", verbWrite, func(s *server) handler { return s.putJob }, config.MaxTxnBytes},
	{"DELETE /v1/jobs/{job}", verbWrite, func(s *server) handler { return s.deleteJob }, 0},
	{"GET /v1/jobs/{job}/executions", "", func(s *server) handler { return s.executions }, 0},
	{"GET /v1/jobs/{job}/executions/{id}", "", func(s *server) handler { return s.execution }, 0},
	{"POST /v1/jobs/{job}/trigger", verbTrigger, func(s *server) handler { return s.trigger }, 0},
	{"DELETE /v1/jobs/{job}/trigger/{id}", verbTrigger, func(s *server) handler { return s.cancelRun }, 0},
	{"POST /v1/jobs/{job}/pause", verbPause, func(s *server) handler { return s.pause }, 0},
	{"POST /v1/jobs/{job}/resume", verbPause, func(s *server) handler { return s.resume }, 0},
	{"PUT /v1/catalog", verbCatalog, func(s *server) handler { return s.putCatalog }, config.MaxCatalogBytes},
	{"GET /v1/timeline", "", func(s *server) handler { return s.timeline }, 0},
	{"GET /v1/health", "", func(s *server) handler { return s.health }, 0},
	{"GET /v1/members", "", func(s *server) handler { return s.members }, 0},
}

// Routes are the API's endpoints as "METHOD /path" patterns; openapi.yaml
// documents exactly these (TestOpenAPIDocumentsEveryRoute).
func Routes() []string {
	out := make([]string, len(routes))
	for i, r := range routes {
		out[i] = r.pattern
	}
	return out
}

// Handler serves the API.
func Handler(cfg Config) http.Handler {
	s := &server{cfg: cfg, journals: journal.NewCache(cfg.KV, cfg.Cluster), rings: ops.NewRings(cfg.KV, cfg.Cluster),
		jobWriter: config.NewJobWriter(cfg.KV, cfg.Cluster), anonymous: make(chan struct{}, maxAnonymousReads)}
	mux := http.NewServeMux()
	for _, r := range routes {
		limit := r.body
		if limit == 0 {
			limit = MaxBodyBytes
		}
		if r.verb != "" {
			mux.Handle(r.pattern, cfg.Auth.require(s.serve(s.authorize(r.verb, r.handle(s)), limit)))
		} else {
			mux.Handle(r.pattern, cfg.Auth.Reads(s.boundAnonymous(s.serve(r.handle(s), limit))))
		}
	}
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
	})
	// Answers over 1 KB go gzipped to a client that accepts it: the
	// dashboard's timeline of thousands of slots shrinks tenfold or more
	// (TestTimelineIsGzipped).
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return gzhttp.GzipHandler(audit(log, sameSite(mux)))
}

type server struct {
	cfg Config
	// journals is the cluster's journals as of the last read: a dashboard
	// asks every second, and each read then fetches only the entries
	// written since.
	journals *journal.Cache
	// rings is every history ring as of the last timeline read: each read
	// then fetches only the ring keys written since.
	rings *ops.Rings
	// catalogs is the stored catalog as of the last read: while it is
	// unchanged a request reads only its head's revision from etcd.
	catalogs config.StoredCache
	// jobWriter writes single jobs (PUT and DELETE /v1/jobs/{job}), keeping
	// what it read and wrote, so a create costs etcd one request.
	jobWriter *config.JobWriter
	// anonymous holds a token for each read without credentials in
	// flight (boundAnonymous).
	anonymous chan struct{}
}

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) { writeJSON(w, code, Error{Error: msg}) }

// handler is an endpoint: it answers, or returns an error with its status.
// r.Body is the whole body, already read (within the route's limit).
type handler func(ctx context.Context, r *http.Request) (any, error)

// statusError is an error with the HTTP status it answers with, and the
// body to answer (an Error of msg when nil).
type statusError struct {
	code int
	msg  string
	body any
}

func (e *statusError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &statusError{code: code, msg: fmt.Sprintf(format, args...)}
}

func (s *server) serve(h handler, limit int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := s.answer(w, r, h, limit)
		var se *statusError
		switch {
		case errors.As(err, &se) && se.body != nil:
			writeJSON(w, se.code, se.body)
		case errors.As(err, &se):
			writeError(w, se.code, se.msg)
		case errors.Is(err, config.ErrNoCatalog):
			writeError(w, http.StatusNotFound, err.Error())
		case err != nil:
			writeError(w, http.StatusBadGateway, "etcd: "+err.Error())
		default:
			if t, ok := v.(tagged); ok {
				t.write(w)
				return
			}
			writeJSON(w, http.StatusOK, v)
		}
	}
}

// tagged is an answer with its own status and ETag: the body as JSON, or
// raw bytes of contentType.
type tagged struct {
	code        int
	etag        int64
	body        any
	raw         []byte
	contentType string
}

func (t tagged) write(w http.ResponseWriter) {
	if t.etag > 0 {
		w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(t.etag, 10)))
	}
	if t.raw == nil {
		writeJSON(w, t.code, t.body)
		return
	}
	w.Header().Set("Content-Type", t.contentType)
	w.WriteHeader(t.code)
	w.Write(t.raw)
}

// answer reads r's body, at most limit bytes, and answers r with h within
// requestTimeout, counted once the body is in (a slow upload does not eat
// the etcd work's time). A body over the limit is a 413 naming it, a body
// that could not be read (the client too slow for the server's
// ReadTimeout, or gone) a 400 (TestWriteActionsNeedTheToken,
// TestSlowClientsAreCutOff in cmd/kira).
func (s *server) answer(w http.ResponseWriter, r *http.Request, h handler, limit int64) (any, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, errorf(http.StatusRequestEntityTooLarge, "the body is over %d bytes, the limit of %s", limit, r.Pattern)
	case err != nil:
		return nil, errorf(http.StatusBadRequest, "reading the body: %v", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	return h(ctx, r)
}

func (s *server) status(ctx context.Context, _ *http.Request) (any, error) {
	return ops.ReadStatusCached(ctx, s.cfg.KV, s.cfg.Cluster, &s.catalogs)
}

// job returns the stored catalog's job named in the path, from the
// catalog the server last read while it is unchanged (s.catalogs).
func (s *server) job(ctx context.Context, r *http.Request) (config.Job, error) {
	name := r.PathValue("job")
	stored, err := s.catalogs.Read(ctx, s.cfg.KV, s.cfg.Cluster, 0)
	if err != nil {
		return config.Job{}, err
	}
	j, ok := stored.Catalog.Job(name)
	if !ok {
		return config.Job{}, errorf(http.StatusNotFound, "cluster %q has no job %q", s.cfg.Cluster, name)
	}
	return j, nil
}

// intParam reads the query parameter name: def when absent, else a whole
// number in [0, max].
func intParam(r *http.Request, name string, def, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > max {
		return 0, errorf(http.StatusBadRequest, "%s=%q: want a whole number from 0 to %d", name, v, max)
	}
	return n, nil
}

func (s *server) jobs(ctx context.Context, _ *http.Request) (any, error) {
	return ops.ReadJobs(ctx, s.cfg.KV, s.journals, &s.catalogs, s.cfg.Cluster, time.Now())
}

func (s *server) jobDetail(ctx context.Context, r *http.Request) (any, error) {
	d, ok, err := ops.ReadJob(ctx, s.cfg.KV, s.journals, &s.catalogs, s.cfg.Cluster, r.PathValue("job"), time.Now())
	if err == nil && !ok {
		err = errorf(http.StatusNotFound, "cluster %q has no job %q", s.cfg.Cluster, r.PathValue("job"))
	}
	return s.forReader(r, d), err
}

// jobPartition returns the job named in the path and the partition its
// query names, -1 for every partition.
func (s *server) jobPartition(ctx context.Context, r *http.Request) (config.Job, int, error) {
	j, err := s.job(ctx, r)
	if err != nil {
		return config.Job{}, 0, err
	}
	partition, err := intParam(r, "partition", -1, j.Partitions-1)
	return j, partition, err
}

// execution is one record of the job's history, by execution id.
func (s *server) execution(ctx context.Context, r *http.Request) (any, error) {
	j, err := s.job(ctx, r)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	recs, err := ops.ReadHistoryWhere(ctx, s.cfg.KV, s.journals, s.cfg.Cluster, j.Name, -1, 1, func(rec history.Record) bool { return rec.ExecutionID == id })
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, errorf(http.StatusNotFound, "job %s has no execution %q in its history (it keeps history_limit records a slot)", j.Name, id)
	}
	return recs[0], nil
}

func (s *server) executions(ctx context.Context, r *http.Request) (any, error) {
	j, partition, err := s.jobPartition(ctx, r)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", 20, 10000)
	if err != nil {
		return nil, err
	}
	keep, err := ops.OutcomeFilter(r.URL.Query().Get("outcome"))
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "%v", err)
	}
	return ops.ReadHistoryWhere(ctx, s.cfg.KV, s.journals, s.cfg.Cluster, j.Name, partition, limit, keep)
}

// Triggered answers a trigger: the execution id of each slot's run.
type Triggered struct {
	Job          string     `json:"job"`
	Partitions   []int      `json:"partitions"`
	ExecutionIDs []string   `json:"execution_ids"`
	At           *time.Time `json:"at,omitempty"` // a one-off run's time (?at= or ?in=)
}

func (s *server) trigger(ctx context.Context, r *http.Request) (any, error) {
	j, partition, err := s.jobPartition(ctx, r)
	if err != nil {
		return nil, err
	}
	at, err := oneOffTime(r, time.Now())
	if err != nil {
		return nil, err
	}
	out := Triggered{Job: j.Name, Partitions: []int{}}
	if !at.IsZero() {
		at = at.UTC()
		out.At = &at
	}
	var slots []shard.Slot
	for p := range j.Partitions {
		if partition < 0 || p == partition {
			slots = append(slots, shard.Slot{Job: j.Name, Partition: p})
			out.Partitions = append(out.Partitions, p)
		}
	}
	switch c := r.URL.Query().Get("cascade"); {
	case c == "true" && partition >= 0:
		return nil, errorf(http.StatusBadRequest, "cascade=true runs every partition (the job's dependents wait for all of them): leave out partition")
	case c == "true" && !at.IsZero():
		return nil, errorf(http.StatusBadRequest, "cascade=true runs now: leave out at and in")
	case c == "true":
		out.ExecutionIDs, err = ops.RequestCascade(ctx, s.cfg.KV, s.cfg.Cluster, slots) // its dependents (after:) run after it
	case c != "" && c != "false":
		return nil, errorf(http.StatusBadRequest, "cascade=%q: want true or false", c)
	default:
		out.ExecutionIDs, err = s.requestRuns(ctx, slots, at)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// JobState answers a pause or a resume.
type JobState struct {
	Job    string `json:"job"`
	Paused bool   `json:"paused"`
}

func (s *server) pause(ctx context.Context, r *http.Request) (any, error) {
	return s.setPaused(ctx, r, true)
}

func (s *server) resume(ctx context.Context, r *http.Request) (any, error) {
	return s.setPaused(ctx, r, false)
}

func (s *server) setPaused(ctx context.Context, r *http.Request, paused bool) (any, error) {
	j, err := s.job(ctx, r)
	if err != nil {
		return nil, err
	}
	if paused {
		err = ops.Pause(ctx, s.cfg.KV, s.cfg.Cluster, j.Name)
	} else {
		err = ops.Resume(ctx, s.cfg.KV, s.cfg.Cluster, j.Name)
	}
	if err != nil {
		return nil, err
	}
	return JobState{Job: j.Name, Paused: paused}, nil
}
