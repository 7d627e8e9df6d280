package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// otlpSink is a real OTLP trace receiver: it keeps what it is sent.
type otlpSink struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.ResourceSpans
}

func (s *otlpSink) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	s.spans = append(s.spans, req.ResourceSpans...)
	s.mu.Unlock()
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// ServeHTTP is OTLP over HTTP: POST /v1/traces, protobuf.
func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
		return
	}
	resp, _ := s.Export(r.Context(), &req)
	data, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(data)
}

// find returns the first span named name (and its resource's attributes)
// that match says is the one.
func (s *otlpSink) find(name string, match func(*tracepb.Span) bool) (*tracepb.Span, map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range s.spans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				if sp.Name == name && match(sp) {
					return sp, attrMap(rs.Resource.GetAttributes())
				}
			}
		}
	}
	return nil, nil
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		v := kv.Value.GetStringValue()
		if v == "" {
			v = fmt.Sprint(kv.Value.GetIntValue())
		}
		out[kv.Key] = v
	}
	return out
}

// Traces go to a real OTLP receiver, over gRPC and over HTTP, configured only
// by the standard OTEL_* variables: the execution, acquisition and fence
// spans arrive with the member's resource, and an HTTP job's receiver gets
// the traceparent of its execution's span.
func TestTracesReachAnOTLPReceiver(t *testing.T) {
	for _, protocol := range []string{"grpc", "http/protobuf"} {
		t.Run(strings.ReplaceAll(protocol, "/", "-"), func(t *testing.T) {
			sink := &otlpSink{}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			if protocol == "grpc" {
				srv := grpc.NewServer()
				coltracepb.RegisterTraceServiceServer(srv, sink)
				go srv.Serve(l)
				defer srv.Stop()
			} else {
				srv := &http.Server{Handler: sink}
				go srv.Serve(l)
				defer srv.Close()
			}
			parents := make(chan string, 100)
			job := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/run" {
					return // the fence raise
				}
				select {
				case parents <- r.Header.Get("Traceparent"):
				default:
				}
			}))
			defer job.Close()
			t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+l.Addr().String())
			t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
			etcd := etcdtest.Start(t)
			dir := t.TempDir()
			catalog := filepath.Join(dir, "c.yaml")
			os.WriteFile(catalog, []byte("cluster: traced\njobs:\n  - {name: hook, schedule: \"@every 1s\", http: {url: \""+job.URL+"/run\"}, fence_url: \""+job.URL+"/fence\"}\n"), 0o600)
			start(t, "run", "--catalog", catalog, "--etcd", etcd.Endpoints()[0])

			var traceparent string
			kiratest.WaitUntil(t, "an execution's request with a traceparent", 20*time.Second, func() bool {
				select {
				case p := <-parents:
					traceparent = p
					return strings.Count(p, "-") == 3
				default:
					return false
				}
			})
			parts := strings.Split(traceparent, "-")
			traceID, spanID := parts[1], parts[2]
			var client *tracepb.Span
			kiratest.WaitUntil(t, "the HTTP client span the request names", 20*time.Second, func() bool {
				client, _ = sink.find("HTTP POST", func(sp *tracepb.Span) bool {
					return hex.EncodeToString(sp.TraceId) == traceID && hex.EncodeToString(sp.SpanId) == spanID
				})
				return client != nil
			})
			if client.Kind != tracepb.Span_SPAN_KIND_CLIENT || attrMap(client.Attributes)["http.response.status_code"] != "200" {
				t.Fatalf("client span %v %v", client.Kind, attrMap(client.Attributes))
			}
			var exec *tracepb.Span
			var res map[string]string
			kiratest.WaitUntil(t, "the execution span whose child the request is", 20*time.Second, func() bool {
				exec, res = sink.find("kira.execution hook", func(sp *tracepb.Span) bool {
					return hex.EncodeToString(sp.TraceId) == traceID && bytes.Equal(sp.SpanId, client.ParentSpanId)
				})
				return exec != nil
			})
			if member := attrMap(exec.Attributes)["kira.member"]; member == "" || res["service.instance.id"] != member || res["kira.member"] != member {
				t.Fatalf("resource %v does not name the member of span %v", res, attrMap(exec.Attributes))
			}
			if res["service.name"] != "kira" || res["kira.cluster"] != "traced" || res["deployment.environment.name"] != "test" || res["host.name"] == "" {
				t.Fatalf("resource %v", res)
			}
			if attrs := attrMap(exec.Attributes); attrs["http.response.status_code"] != "200" || attrs["kira.job"] != "hook" || attrs["kira.execution_id"] == "" {
				t.Fatalf("execution span attributes %v", attrs)
			}
			for _, name := range []string{"kira.slot.acquire hook", "kira.fence.raise hook"} {
				kiratest.WaitUntil(t, name, 10*time.Second, func() bool {
					sp, _ := sink.find(name, func(sp *tracepb.Span) bool { return attrMap(sp.Attributes)["kira.fencing_token"] != "0" })
					return sp != nil
				})
			}
		})
	}
}
