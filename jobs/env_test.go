package jobs

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// A command gets the member's PATH and HOME, what pass_env names, the
// execution's facts and its own env with references expanded, and nothing
// else of the member's: its etcd password above all.
func TestCommandEnvironmentIsOnlyWhatItIsGiven(t *testing.T) {
	t.Setenv("KIRA_ETCD_PASSWORD", "etcd-secret")
	t.Setenv("KIRA_TEST_UNRELATED", "not passed")
	t.Setenv("KIRA_TEST_API_TOKEN", "api-secret")
	t.Setenv("EXTRA_SETTING", "passed")
	c := &Command{Argv: []string{"env"}, PassEnv: []string{"EXTRA_SETTING"},
		Env: map[string]string{"API_TOKEN": "${KIRA_TEST_API_TOKEN}", "PRICE": "$$5"}}
	res := c.Execute(context.Background(), exec1)
	if res.Outcome != Succeeded {
		t.Fatalf("%s: %v\n%s", res.Outcome, res.Err, res.OutputTail)
	}
	env := "\n" + res.OutputTail
	for _, want := range []string{"\nPATH=", "\nEXTRA_SETTING=passed", "\nAPI_TOKEN=api-secret", "\nPRICE=$5", "\nKIRA_JOB=reconcile", "\n" + fencing.EnvToken + "=4711"} {
		if !strings.Contains(env, want) {
			t.Errorf("missing %q in the command's environment:%s", want, env)
		}
	}
	for _, leak := range []string{"etcd-secret", "KIRA_ETCD_PASSWORD", "KIRA_TEST_UNRELATED", "KIRA_TEST_API_TOKEN"} {
		if strings.Contains(env, leak) {
			t.Errorf("%q reached the command:%s", leak, env)
		}
	}

	missing := &Command{Argv: []string{"true"}, Env: map[string]string{"API_TOKEN": "${KIRA_TEST_NOT_SET}"}}
	res = missing.Execute(context.Background(), exec1)
	if res.Outcome != Failed || res.Err == nil || !strings.Contains(res.Err.Error(), "env API_TOKEN: ${KIRA_TEST_NOT_SET} is not set in the member's environment") {
		t.Fatalf("a reference to an unset variable: %s %v", res.Outcome, res.Err)
	}
}

// An HTTP job's URL, headers and body are expanded from the member's
// environment for each request; its errors show the URL as written.
func TestHTTPExpandsReferencesAndHidesThem(t *testing.T) {
	var got *http.Request
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		b, _ := io.ReadAll(r.Body)
		body = string(b)
	}))
	defer srv.Close()
	env := map[string]string{"BASE": srv.URL, "TOKEN": "s3cret"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	h := &HTTP{LookupEnv: lookup, Spec: config.HTTPSpec{Method: "POST", URL: "${BASE}/hook?key=${TOKEN}",
		Headers: map[string]string{"Authorization": "Bearer ${TOKEN}"}, Body: `{"token":"${TOKEN}"}`}}
	if res := h.Execute(context.Background(), exec1); res.Outcome != Succeeded {
		t.Fatalf("%s: %v", res.Outcome, res.Err)
	}
	if got.URL.Query().Get("key") != "s3cret" || got.Header.Get("Authorization") != "Bearer s3cret" || body != `{"token":"s3cret"}` {
		t.Fatalf("request %v %v %q", got.URL, got.Header, body)
	}

	env["BASE"] = "http://127.0.0.1:1" // nothing listens there
	res := h.Execute(context.Background(), exec1)
	if res.Outcome != Failed || strings.Contains(res.Err.Error(), "s3cret") || !strings.Contains(res.Err.Error(), "${BASE}/hook?key=${TOKEN}") {
		t.Fatalf("a failed request: %s %v", res.Outcome, res.Err)
	}
	delete(env, "TOKEN")
	res = h.Execute(context.Background(), exec1)
	if res.Outcome != Failed || !strings.Contains(res.Err.Error(), "${TOKEN} is not set in the member's environment") {
		t.Fatalf("an unset reference: %s %v", res.Outcome, res.Err)
	}
}

// A command runs in its execution's trace: TRACEPARENT in its environment.
func TestCommandGetsItsTraceparent(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	defer otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	res := (&Command{Argv: []string{"env"}}).Execute(ctx, exec1)
	want := "TRACEPARENT=00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if res.Outcome != Succeeded || !strings.Contains(res.OutputTail, want) {
		t.Fatalf("%s, want %s in:\n%s", res.Outcome, want, res.OutputTail)
	}
}
