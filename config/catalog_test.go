package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const good = `cluster: demo
membership:
  lease_ttl: 6s
jobs:
  - name: bridge-health
    schedule: "@every 1s"
    timeout: 30s
    command: ["sh", "-c", "./check-bridges"]
  - name: reconcile
    schedule: "0 */5 * * * *"
    partitions: 12
    history_limit: 50
    http: {url: "http://127.0.0.1:8080/reconcile", method: POST}
`

func TestParseValidCatalog(t *testing.T) {
	cat, err := Parse("catalog.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if cat.Cluster != "demo" || cat.Membership.LeaseTTL != 6*time.Second || len(cat.Jobs) != 2 {
		t.Fatalf("unexpected catalog %+v", cat)
	}
	h := cat.Jobs[0]
	if h.Partitions != 1 || h.Timeout != 30*time.Second || len(h.Command) != 3 {
		t.Fatalf("bridge-health = %+v", h)
	}
	if h.Misfire != MisfireFireOnce || h.Overlap != OverlapSkip || h.CatchupWindow != 10*time.Minute || h.Retries.Max != 0 || h.HistoryLimit != DefaultHistoryLimit {
		t.Fatalf("policy defaults not applied: %+v", h)
	}
	r, ok := cat.Job("reconcile")
	if !ok || r.Partitions != 12 || r.HTTP == nil || r.HTTP.Method != "POST" || r.HistoryLimit != 50 {
		t.Fatalf("reconcile = %+v", r)
	}
}

func TestDefaults(t *testing.T) {
	cat, err := Parse("c.yaml", []byte("jobs:\n  - name: a\n    schedule: '@hourly'\n    handler: noop\n  - name: b\n    schedule: '* * * * *'\n    http: {url: 'https://x.example/run'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cat.Cluster != DefaultCluster || cat.Membership.LeaseTTL != DefaultLeaseTTL {
		t.Fatalf("defaults not applied: %+v", cat)
	}
	if cat.Jobs[0].Partitions != 1 || cat.Jobs[1].HTTP.Method != "POST" {
		t.Fatalf("job defaults not applied: %+v", cat.Jobs)
	}
}

// Each invalid catalog must fail with a problem at the given line that names the field.
func TestValidationErrors(t *testing.T) {
	cases := []struct {
		name, yaml string
		line       int
		field, msg string
	}{
		{"unknown field", "jobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n    retires: 3\n", 5, "", "unknown field \"retires\""},
		{"unknown top field", "clustr: x\njobs: []\n", 1, "", "unknown field \"clustr\""},
		{"duplicate name", "jobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n  - name: a\n    schedule: '@hourly'\n    handler: h\n", 5, "jobs[1].name", "duplicate job name \"a\""},
		{"bad cron", "jobs:\n  - name: a\n    schedule: '61 * * * *'\n    handler: h\n", 3, "jobs[0].schedule", "invalid cron expression"},
		{"missing schedule", "jobs:\n  - name: a\n    handler: h\n", 2, "jobs[0]", "schedule is required"},
		{"missing executor", "jobs:\n  - name: a\n    schedule: '@hourly'\n", 2, "jobs[0]", "has no executor"},
		{"two executors", "jobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n    command: [true]\n", 2, "jobs[0]", "sets 2 executors"},
		{"short lease", "membership:\n  lease_ttl: 1s\njobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n", 2, "membership.lease_ttl", "under the minimum"},
		{"fractional lease", "membership:\n  lease_ttl: 2500ms\njobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n", 2, "membership.lease_ttl", "whole number of seconds"},
		{"bad duration", "jobs:\n  - name: a\n    schedule: '@hourly'\n    timeout: soon\n    handler: h\n", 4, "jobs[0].timeout", "not a duration"},
		{"bad name", "jobs:\n  - name: Billing_Run\n    schedule: '@hourly'\n    handler: h\n", 2, "jobs[0].name", "not a valid job name"},
		{"zero partitions", "jobs:\n  - name: a\n    schedule: '@hourly'\n    partitions: 0\n    handler: h\n", 4, "jobs[0].partitions", "between 1 and"},
		{"empty command", "jobs:\n  - name: a\n    schedule: '@hourly'\n    command: []\n", 4, "jobs[0].command", "at least a program"},
		{"bad url", "jobs:\n  - name: a\n    schedule: '@hourly'\n    http:\n      url: localhost:80\n", 5, "jobs[0].http.url", "not an absolute http(s) URL"},
		{"wrong type", "jobs:\n  - name: a\n    schedule: '@hourly'\n    partitions: many\n    handler: h\n", 4, "", "partitions"},
		{"no jobs", "cluster: x\n", 0, "jobs", "no jobs"},
		{"bad misfire", "jobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n    misfire: sometimes\n", 5, "jobs[0].misfire", "not one of skip, fire-once, fire-all"},
		{"bad overlap", "jobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n    overlap: forbid\n", 5, "jobs[0].overlap", "not one of skip, queue, replace, allow"},
		{"bad timezone", "jobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n    timezone: Mars/Olympus\n", 5, "jobs[0].timezone", "unknown time zone"},
		{"two zones", "jobs:\n  - name: a\n    schedule: 'CRON_TZ=UTC 0 * * * *'\n    handler: h\n    timezone: Europe/Istanbul\n", 3, "jobs[0].schedule", "keep one"},
		{"bad retries", "jobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n    retries: {max: -1}\n", 5, "jobs[0].retries.max", "between 0 and 100"},
		{"backoff order", "jobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n    retries:\n      max: 2\n      backoff: 10s\n      max_backoff: 1s\n", 8, "jobs[0].retries.max_backoff", "below backoff"},
		{"bad window", "jobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n    catchup_window: 0s\n", 5, "jobs[0].catchup_window", "positive"},
		{"history limit zero", "jobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n    history_limit: 0\n", 5, "jobs[0].history_limit", "between 1 and 999"},
		{"history limit too big", "jobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n    history_limit: 1000\n", 5, "jobs[0].history_limit", "between 1 and 999"},
		{"bad fence url", "jobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n    fence_url: /fence\n", 5, "jobs[0].fence_url", "not an absolute http(s) URL"},
		{"empty fence command", "jobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n    fence_command: []\n", 5, "jobs[0].fence_command", "at least a program"},
		{"two fences", "jobs:\n  - name: a\n    schedule: '@hourly'\n    handler: h\n    fence_url: http://x/f\n    fence_command: [raise]\n", 6, "jobs[0].fence_command", "not both"},
		{"syntax", "jobs:\n  - name: a\n   schedule: [\n", 3, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Parse error = %v; want *config.Error", err)
			}
			for _, p := range cerr.Problems {
				if p.File == "bad.yaml" && p.Line == tc.line && p.Field == tc.field && strings.Contains(p.Message, tc.msg) {
					if !strings.HasPrefix(p.String(), "bad.yaml:") {
						t.Errorf("problem %q does not start with the file name", p)
					}
					return
				}
			}
			t.Fatalf("no problem at line %d field %q containing %q; got:\n%v", tc.line, tc.field, tc.msg, err)
		})
	}
}

func TestReportsEveryProblem(t *testing.T) {
	_, err := Parse("bad.yaml", []byte("membership:\n  lease_ttl: 1s\njobs:\n  - name: a\n    schedule: 'nope'\n    handler: h\n  - name: a\n    schedule: '@hourly'\n"))
	var cerr *Error
	if !errors.As(err, &cerr) || len(cerr.Problems) != 4 {
		t.Fatalf("want 4 problems (lease, cron, duplicate, executor), got %v", err)
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(path, []byte("jobs:\n  - name: a\n    schedule: bad\n    handler: h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":3:") {
		t.Fatalf("Load error = %v; want it to start with %s:3:", err, path)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("missing file accepted")
	}
}

func TestExampleCatalogsAreValid(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.yaml")
	more, _ := filepath.Glob("../examples/*/*.yaml")
	files = append(files, more...)
	if len(files) < 3 {
		t.Fatalf("found only %d example catalogs", len(files))
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Error(err)
		}
	}
}

// A catalog written by Marshal reads back equal, and its text is the
// catalog format (durations as text, defaults spelled out).
func TestMarshalRoundTrips(t *testing.T) {
	cat, err := Load("../examples/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cat.Jobs = append(cat.Jobs, Job{Name: "hook", Schedule: "*/5 * * * *", Partitions: 2, HTTP: &HTTPSpec{URL: "http://x/${TOKEN}", Method: "PUT",
		Headers: map[string]string{"A": "b"}, Body: "line one\nline two\n"}, Misfire: MisfireFireAll, CatchupWindow: time.Hour, HistoryLimit: 5,
		Overlap: cat.Jobs[0].Overlap, Retries: Retries{Max: 2, Backoff: time.Second, MaxBackoff: time.Minute}, Jitter: 3 * time.Second, Timezone: "Europe/Istanbul"})
	text, err := Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("marshalled.yaml", text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if !reflect.DeepEqual(back, cat) {
		t.Fatalf("round trip changed the catalog:\n%s\n%+v\n%+v", text, back, cat)
	}
	for _, want := range []string{"lease_ttl: ", "catchup_window: 1h0m0s", "timezone: Europe/Istanbul"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
}

// notify: rules, per job and as the catalog's default: validated with the
// field's line, inherited by the jobs without their own, turned off by
// notify: [], and kept through storage and Marshal.
func TestNotifyRules(t *testing.T) {
	const text = `cluster: c
notify:
  - {on: [failed, missed], webhook: "https://hooks.example/${HOOK_PATH}", headers: {Authorization: "Bearer ${HOOK_TOKEN}"}}
jobs:
  - {name: inherits, schedule: "@every 1s", command: ["true"]}
  - {name: own, schedule: "@every 1s", command: ["true"], notify: [{on: [timed_out], webhook: "http://x/y"}]}
  - {name: silent, schedule: "@every 1s", command: ["true"], notify: []}
`
	cat, err := Parse("n.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]int{}
	for _, j := range cat.Jobs {
		rules[j.Name] = len(j.Notify)
	}
	if rules["inherits"] != 1 || cat.Jobs[0].Notify[0].On[1] != "missed" || rules["own"] != 1 || cat.Jobs[1].Notify[0].Webhook != "http://x/y" || rules["silent"] != 0 {
		t.Fatalf("rules per job: %v", rules)
	}
	stored, _ := json.Marshal(cat)
	back, err := decodeStored(stored)
	if err != nil || !reflect.DeepEqual(back, cat) {
		t.Fatalf("stored and read back: %v\n%+v\n%+v", err, back, cat)
	}
	text2, _ := Marshal(cat)
	if back, err := Parse("m.yaml", text2); err != nil || !reflect.DeepEqual(back, cat) {
		t.Fatalf("Marshal round trip: %v\n%s", err, text2)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"notify: [{on: [failed], webhook: ftp://x}]", "n.yaml:3:90: jobs[0].notify[0].webhook: \"ftp://x\" is not an absolute http(s) URL"},
		{"notify: [{on: [exploded], webhook: http://x}]", "n.yaml:3:72: jobs[0].notify[0].on[0]: \"exploded\" is not an outcome"},
		{"notify: [{webhook: http://x}]", "jobs[0].notify[0]: on: is required"},
		{"notify: [{on: [failed]}]", "jobs[0].notify[0]: webhook: is required"},
	} {
		_, err := Parse("n.yaml", []byte("cluster: c\njobs:\n  - {name: j, schedule: \"@every 1s\", command: [\"true\"], "+bad.yaml+"}\n"))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: got %v, want %q", bad.yaml, err, bad.want)
		}
	}
}

// placement: labels are checked with their line, and kept through storage
// and Marshal.
func TestPlacement(t *testing.T) {
	cat, err := Parse("p.yaml", []byte("cluster: c\njobs:\n  - {name: train, schedule: \"@every 1s\", command: [\"true\"], placement: {labels: {gpu: \"true\", zone: eu-1}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cat.Jobs[0].Placement.String(); got != "gpu=true,zone=eu-1" {
		t.Fatalf("placement %q", got)
	}
	text, _ := Marshal(cat)
	if back, err := Parse("m.yaml", text); err != nil || !reflect.DeepEqual(back, cat) {
		t.Fatalf("Marshal round trip: %v\n%s", err, text)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"placement: {labels: {\"-gpu\": x}}", "p.yaml:3:86: jobs[0].placement.labels.-gpu: label key \"-gpu\""},
		{"placement: {labels: {gpu: \"a b\"}}", "jobs[0].placement.labels.gpu: label gpu: value \"a b\""},
		{"placement: {}", "jobs[0].placement: placement needs labels"},
	} {
		_, err := Parse("p.yaml", []byte("cluster: c\njobs:\n  - {name: j, schedule: \"@every 1s\", command: [\"true\"], "+bad.yaml+"}\n"))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: got %v, want %q", bad.yaml, err, bad.want)
		}
	}
}

// revision: and generation: are whole numbers of at least 1; anything
// else is refused with its file, line and field, and Marshal writes them back.
func TestRevisionAndGeneration(t *testing.T) {
	job := "jobs:\n  - {name: a, schedule: \"@every 1s\", command: [\"true\"]}\n"
	cat, err := Parse("c.yaml", []byte("revision: 12\ngeneration: 3\n"+job))
	if err != nil || cat.Revision != 12 || cat.Generation != 3 {
		t.Fatalf("revision 12 generation 3: %+v, %v", cat, err)
	}
	text, _ := Marshal(cat)
	if back, err := Parse("m.yaml", text); err != nil || back.Revision != 12 || back.Generation != 3 {
		t.Fatalf("Marshal round trip:\n%s", text)
	}
	for _, c := range []struct{ text, want string }{
		{job + "revision: 0\n", "c.yaml:3:11: revision: 0 is not valid"},
		{job + "generation: -2\n", "c.yaml:3:13: generation: -2 is not valid"},
		{job + "revision: abc\n", "c.yaml:3:11: field \"revision\""},
	} {
		if _, err := Parse("c.yaml", []byte(c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want %q", c.text, err, c.want)
		}
	}
}
