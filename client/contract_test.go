package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/api"
	"github.com/kira-scheduler/kira/client"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
)

// contractCatalog is the running member's: a job it leads both slots of,
// a dependent, a job too wide for the timeline's detail, and one no member
// may run (a health problem).
const contractCatalog = `cluster: client
membership:
  lease_ttl: 3s
jobs:
  - name: tick
    schedule: "@every 1s"
    partitions: 2
    handler: ok
  - name: after-tick
    after: [tick]
    handler: ok
  - name: wide
    schedule: "@every 2s"
    partitions: 17
    handler: ok
  - name: mars
    schedule: "@hourly"
    command: ["true"]
    env: {KEY: s3cret}
    placement: {labels: {zone: mars}}
`

// step is one call of the contract: the route it must call, the call, and
// its checks of the answer's key fields.
type step struct {
	route string
	call  func() (any, error)
	check func(any) error
}

// Every route's real answer, from a member running jobs, decodes into the
// client's type with DisallowUnknownFields and encodes back to the same
// JSON: a field the server adds, renames or drops, or a type it changes,
// fails here. Each method calls its route (methods), and every route of
// api.Routes() is called.
func TestAnswersMatchTheServer(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	runMember(t, etcd.Endpoints(), contractCatalog)
	srv := serveAPI(t, cli, api.Config{Leases: cli, Maintenance: cli}, nil)
	rec := &recorder{}
	c := newClient(t, srv, rec, client.WithToken(token))
	ctx := context.Background()

	kiratest.WaitUntil(t, "both slots of tick and one of wide have run", 60*time.Second, func() bool {
		recs, err := c.Executions(ctx, "tick", client.ExecutionsQuery{Outcome: "succeeded", Limit: 50})
		wide, werr := c.Executions(ctx, "wide", client.ExecutionsQuery{Limit: 1})
		return err == nil && slices.ContainsFunc(recs, func(e client.Execution) bool { return e.Partition == 0 }) &&
			slices.ContainsFunc(recs, func(e client.Execution) bool { return e.Partition == 1 }) && werr == nil && len(wide) > 0
	})
	var (
		written    *api.JobWritten
		execID     string
		waitingRun string
	)
	steps := []step{
		{"GET /v1/status", func() (any, error) { return c.Status(ctx) }, func(v any) error {
			s := v.(*client.Status)
			return expect(s.Cluster == "client" && len(s.Members) == 1 && s.Members[0].Labels["zone"] == "earth" &&
				len(s.Slots) == 2+1+17+1 && slices.Contains(s.Unplaced, "mars") && s.CatalogSource != nil, "%+v", s)
		}},
		{"GET /v1/jobs", func() (any, error) { return c.Jobs(ctx) }, func(v any) error {
			js := v.([]client.JobStatus)
			i := slices.IndexFunc(js, func(j client.JobStatus) bool { return j.Name == "tick" })
			return expect(len(js) == 4 && i >= 0 && js[i].SlotsLed == 2 && js[i].LastFire != nil && slices.Equal(js[i].Dependents, []string{"after-tick"}), "%+v", js)
		}},
		{"POST /v1/jobs/{job}/trigger", func() (any, error) {
			return c.Trigger(ctx, "tick", client.TriggerOptions{Partition: client.Partition(1), In: time.Hour})
		}, func(v any) error {
			tr := v.(*api.Triggered)
			if len(tr.ExecutionIDs) == 1 {
				waitingRun = tr.ExecutionIDs[0]
			}
			return expect(tr.Job == "tick" && slices.Equal(tr.Partitions, []int{1}) && len(tr.ExecutionIDs) == 1 && tr.At != nil, "%+v", tr)
		}},
		{"GET /v1/jobs/{job}", func() (any, error) { return c.Job(ctx, "tick") }, func(v any) error {
			d := v.(*client.JobDetail)
			return expect(d.Name == "tick" && d.Spec.Partitions == 2 && d.Spec.Handler == "ok" && len(d.Slots) == 2 && len(d.Upcoming) > 0 &&
				len(d.WaitingRuns) == 1 && d.WaitingRuns[0].ID == waitingRun && !d.WaitingRuns[0].At.IsZero(), "%+v", d)
		}},
		{"DELETE /v1/jobs/{job}/trigger/{id}", func() (any, error) { return c.CancelRun(ctx, "tick", waitingRun) }, func(v any) error {
			r := v.(*client.CancelledRun)
			return expect(r.Cancelled && r.ID == waitingRun && r.Partition == 1 && !r.RequestedAt.IsZero(), "%+v", r)
		}},
		{"POST /v1/jobs/{job}/trigger", func() (any, error) { return c.Trigger(ctx, "tick", client.TriggerOptions{}) }, func(v any) error {
			tr := v.(*api.Triggered)
			return expect(len(tr.ExecutionIDs) == 2 && tr.At == nil, "%+v", tr)
		}},
		{"GET /v1/jobs/{job}/executions", func() (any, error) {
			return c.Executions(ctx, "tick", client.ExecutionsQuery{Partition: client.Partition(0), Limit: 5, Outcome: "succeeded"})
		}, func(v any) error {
			recs := v.([]client.Execution)
			if len(recs) > 0 {
				execID = recs[0].ExecutionID
			}
			ok := len(recs) > 0 && len(recs) <= 5
			for _, r := range recs {
				ok = ok && r.Job == "tick" && r.Partition == 0 && r.Outcome == "succeeded" && r.Token.Valid() && r.ExecutionID != ""
			}
			return expect(ok, "%+v", recs)
		}},
		{"GET /v1/jobs/{job}/executions/{id}", func() (any, error) { return c.Execution(ctx, "tick", execID) }, func(v any) error {
			r := v.(*client.Execution)
			return expect(r.ExecutionID == execID && r.Member != "" && !r.FinishedAt.IsZero(), "%+v", r)
		}},
		{"POST /v1/jobs/{job}/pause", func() (any, error) { return c.Pause(ctx, "wide") }, func(v any) error {
			s := v.(*api.JobState)
			return expect(s.Job == "wide" && s.Paused, "%+v", s)
		}},
		{"POST /v1/jobs/{job}/resume", func() (any, error) { return c.Resume(ctx, "wide") }, func(v any) error {
			s := v.(*api.JobState)
			return expect(s.Job == "wide" && !s.Paused, "%+v", s)
		}},
		{"PUT /v1/jobs/{job}", func() (any, error) {
			return c.PutJob(ctx, "customer-1", []byte("schedule: '@hourly'\nhandler: ok\n"), client.JobWriteOptions{CreateOnly: true})
		}, func(v any) error {
			written = v.(*api.JobWritten)
			return expect(written.Job == "customer-1" && written.Created && written.Revision > 0 && written.Manager == "api:token", "%+v", written)
		}},
		{"GET /v1/jobs/{job}/definition", func() (any, error) { return c.Definition(ctx, "customer-1") }, func(v any) error {
			d := v.(*api.JobDefinition)
			var job struct{ Name, Schedule string }
			return expect(json.Unmarshal(d.Job, &job) == nil && job.Name == "customer-1" && job.Schedule == "@hourly" &&
				d.Revision == written.Revision && d.Manager == "api:token" && d.CatalogRevision >= d.Revision, "%+v %s", d, d.Job)
		}},
		{"PUT /v1/jobs/{job}", func() (any, error) {
			return c.PutJob(ctx, "customer-1", []byte("schedule: '@daily'\nhandler: ok\n"), client.JobWriteOptions{IfRevision: written.Revision})
		}, func(v any) error {
			w := v.(*api.JobWritten)
			return expect(!w.Created && w.Revision > written.Revision, "%+v", w)
		}},
		{"DELETE /v1/jobs/{job}", func() (any, error) { return c.DeleteJob(ctx, "customer-1", client.JobWriteOptions{}) }, func(v any) error {
			w := v.(*api.JobWritten)
			return expect(w.Job == "customer-1" && w.Deleted && w.Revision > written.Revision, "%+v", w)
		}},
		{"PUT /v1/catalog", func() (any, error) {
			return c.PutCatalog(ctx, []byte(contractCatalog+"  - {name: extra, schedule: '@daily', handler: ok}\n"), client.CatalogOptions{DryRun: true})
		}, func(v any) error {
			a := v.(*api.CatalogApplied)
			return expect(a.Cluster == "client" && a.DryRun && !a.Written && len(a.Changes) > 0 && a.Warnings != nil, "%+v", a)
		}},
		{"GET /v1/timeline", func() (any, error) { return c.Timeline(ctx, client.TimelineQuery{Since: 5 * time.Minute}) }, func(v any) error {
			tl := v.(*client.Timeline)
			byName := map[string]client.JobTimeline{}
			for _, j := range tl.Jobs {
				byName[j.Job] = j
			}
			tick, wide := byName["tick"], byName["wide"]
			return expect(tl.Cluster == "client" && tl.Rows == 4 && len(tl.Members) == 1 && tick.Detail && len(tick.Slots) == 2 &&
				len(tick.Slots[0].Executions) > 0 && len(tick.Slots[0].Holders) > 0 && !wide.Detail && len(wide.Buckets) > 0, "%+v", tl)
		}},
		{"GET /v1/timeline", func() (any, error) { return c.Timeline(ctx, client.TimelineQuery{Job: "wide", Limit: 3, Offset: 1}) }, func(v any) error {
			tl := v.(*client.Timeline)
			return expect(tl.Rows == 17 && tl.Offset == 1 && len(tl.Jobs) == 1 && len(tl.Jobs[0].Slots) == 3, "%+v", tl)
		}},
		{"GET /v1/health", func() (any, error) { return c.Health(ctx) }, func(v any) error {
			ps := v.([]client.HealthProblem)
			return expect(slices.ContainsFunc(ps, func(p client.HealthProblem) bool { return p.Kind == "unplaced" }), "%+v", ps)
		}},
		{"GET /v1/members", func() (any, error) { return c.Members(ctx) }, func(v any) error {
			ms := v.([]client.Member)
			return expect(len(ms) == 1 && ms[0].Name == "client-test" && ms[0].SlotsLed > 0 && ms[0].LeaseTTLSeconds != nil && len(ms[0].Jobs) > 0, "%+v", ms)
		}},
	}
	called := map[string]bool{}
	for i, s := range steps {
		got, err := s.call()
		if err != nil {
			t.Fatalf("step %d, %s: %v", i, s.route, err)
		}
		x := rec.last(t)
		if p := patternOf(x.req); p != s.route {
			t.Fatalf("step %d: %s called %s, want %s", i, methods[s.route], p, s.route)
		}
		called[s.route] = true
		if err := sameAnswer(x.body, got); err != nil {
			t.Errorf("%s: %v", s.route, err)
		}
		if err := s.check(got); err != nil {
			t.Errorf("%s: key fields: %v", s.route, err)
		}
	}
	for _, r := range api.Routes() {
		if !called[r] {
			t.Errorf("route %s is not called here: add a step", r)
		}
	}
}

// expect is nil when ok, else an error of format and args.
func expect(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}

// routes matches a request to the API's route pattern.
var routes = func() *http.ServeMux {
	mux := http.NewServeMux()
	for _, r := range api.Routes() {
		mux.Handle(r, http.NotFoundHandler())
	}
	return mux
}()

// patternOf is the route of api.Routes() that req calls, or "".
func patternOf(req *http.Request) string {
	_, p := routes.Handler(req)
	return p
}

// sameAnswer checks that body, the server's JSON, decodes strictly into a
// new value of got's type and that value encodes to the same JSON.
func sameAnswer(body []byte, got any) error {
	typ := reflect.TypeOf(got)
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	v := reflect.New(typ)
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v.Interface()); err != nil {
		return fmt.Errorf("the answer does not decode strictly into %s: %v\n%s", typ, err, body)
	}
	again, err := json.Marshal(v.Elem().Interface())
	if err != nil {
		return err
	}
	var server, client any
	if err := json.Unmarshal(body, &server); err != nil {
		return err
	}
	if err := json.Unmarshal(again, &client); err != nil {
		return err
	}
	if diffs := diffJSON("", server, client); len(diffs) > 0 {
		return fmt.Errorf("%s encodes other JSON than the server's:\n%s", typ, strings.Join(diffs, "\n"))
	}
	return nil
}

// diffJSON lists the paths where the decoded JSON values a (the
// server's) and b (the client's) differ.
func diffJSON(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			av, ina := am[k]
			bv, inb := bm[k]
			switch {
			case !ina:
				out = append(out, fmt.Sprintf("%s/%s: the client writes it, the server does not", path, k))
			case !inb:
				out = append(out, fmt.Sprintf("%s/%s: the server writes it, the client does not", path, k))
			default:
				out = append(out, diffJSON(path+"/"+k, av, bv)...)
			}
		}
		return out
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		var out []string
		for i := range as {
			out = append(out, diffJSON(fmt.Sprintf("%s/%d", path, i), as[i], bs[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(a, b) {
		return []string{fmt.Sprintf("%s: server %v, client %v", path, a, b)}
	}
	return nil
}
