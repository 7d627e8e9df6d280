package main

import (
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/kiratest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// traceLinkURL is TestTraceLinksByTraceID's --trace-url: a trace
// backend's page of one trace.
const traceLinkURL = "http://127.0.0.1:9/trace/{trace_id}?id={execution_id}"

// With half the traces sampled (OTEL_TRACES_SAMPLER), an execution's
// history record keeps the trace id of the span a real OTLP receiver got
// for it, and a record of an unsampled one keeps none; in a browser, the
// job page's history rows and the timeline's marks link by trace id
// (--trace-url with {trace_id}) exactly those that have one, and the
// others have no link.
func TestTraceLinksByTraceID(t *testing.T) {
	chromium(t)
	sink := &otlpSink{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, sink)
	go srv.Serve(l)
	defer srv.Stop()
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+l.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "0.5")
	etcd := etcdtest.Start(t)
	catalog := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(catalog, []byte("cluster: links\njobs:\n  - {name: tick, schedule: \"@every 1s\", command: [\"true\"]}\n"), 0o600)
	addr := freePort(t)
	start(t, "run", "--catalog", catalog, "--etcd", etcd.Endpoints()[0], "--http", addr, "--trace-url", traceLinkURL)

	// records reads tick's latest records from the API, by execution id.
	records := func() map[string]history.Record {
		resp, err := http.Get("http://" + addr + "/v1/jobs/tick/executions?limit=100")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var rs []history.Record
		json.NewDecoder(resp.Body).Decode(&rs)
		out := map[string]history.Record{}
		for _, r := range rs {
			out[r.ExecutionID] = r
		}
		return out
	}
	link := func(r history.Record) string {
		return strings.NewReplacer("{trace_id}", url.QueryEscape(r.TraceID), "{execution_id}", url.QueryEscape(r.ExecutionID)).Replace(traceLinkURL)
	}
	// checkLinks checks links (execution id -> link, "" for none) against
	// the records, and returns one execution linked and one not.
	checkLinks := func(where string, links map[string]string) (linked, unlinked string) {
		recs := records()
		for id, got := range links {
			r, ok := recs[id]
			switch {
			case !ok:
				continue // older than the API's page, or not yet read
			case r.TraceID == "" && got != "":
				t.Fatalf("%s: execution %s, whose record keeps no trace id, links to %q", where, id, got)
			case r.TraceID != "" && got != link(r):
				t.Fatalf("%s: execution %s of trace %s links to %q, want %q", where, id, r.TraceID, got, link(r))
			case r.TraceID != "":
				linked = id
			default:
				unlinked = id
			}
		}
		return linked, unlinked
	}

	page := openDashboard(t, "http://"+addr+"/#job/tick", 2*time.Minute)
	var traced string
	kiratest.WaitUntil(t, "tick's history rows: one linked by its trace id, one without a trace id and no link", 40*time.Second, func() bool {
		var rows [][2]string
		json.Unmarshal([]byte(page(`JSON.stringify([...document.querySelectorAll('#job-history tbody tr')].filter((tr) => tr.querySelector('code')).map((tr) => [tr.querySelector('code').textContent, tr.querySelector('a.trace')?.href || ""]))`)), &rows)
		links := map[string]string{}
		for _, r := range rows {
			links[r[0]] = r[1]
		}
		linked, unlinked := checkLinks("the job page", links)
		traced = linked
		return linked != "" && unlinked != ""
	})
	want := records()[traced]
	var span *tracepb.Span
	kiratest.WaitUntil(t, "the receiver's span of execution "+traced, 20*time.Second, func() bool {
		span, _ = sink.find("kira.execution tick", func(sp *tracepb.Span) bool { return attrMap(sp.Attributes)["kira.execution_id"] == traced })
		return span != nil
	})
	if got := hex.EncodeToString(span.TraceId); got != want.TraceID {
		t.Fatalf("execution %s: the receiver got trace %s, the record keeps %s", traced, got, want.TraceID)
	}

	page(`location.hash = "since=1m"`)
	kiratest.WaitUntil(t, "tick's timeline marks: linked by trace id exactly where the record keeps one", 30*time.Second, func() bool {
		var marks [][2]string
		json.Unmarshal([]byte(page(`JSON.stringify([...document.querySelectorAll('#timeline svg[data-job="tick"] rect.mark')].map((m) => [m.dataset.id, m.dataset.trace]))`)), &marks)
		links := map[string]string{}
		for _, m := range marks {
			if m[0] != "" {
				links[m[0]] = m[1]
			}
		}
		linked, unlinked := checkLinks("the timeline", links)
		return linked != "" && unlinked != ""
	})
}
