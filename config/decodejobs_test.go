package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
)

// agreement decodes data both ways: split says whether decodeSplit read it,
// and when it did, its result and error must be the library's.
func agreement(t *testing.T, data []byte) (split bool) {
	t.Helper()
	f, err := parser.ParseBytes(data, 0)
	if err != nil || len(f.Docs) == 0 || f.Docs[0].Body == nil {
		return false
	}
	var fast, ref rawCatalog
	split, ferr := decodeSplit(f.Docs[0].Body, &fast)
	if !split {
		if !reflect.DeepEqual(fast, rawCatalog{}) {
			t.Fatalf("decodeSplit declined %q but changed the catalog: %+v", data, fast)
		}
		return false
	}
	rerr := yaml.NodeToValue(f.Docs[0].Body, &ref, yaml.DisallowUnknownField())
	if (ferr == nil) != (rerr == nil) {
		t.Fatalf("%q: decodeSplit's error %v, the library's %v", data, ferr, rerr)
	}
	if ferr == nil && !reflect.DeepEqual(fast, ref) {
		t.Fatalf("%q:\ndecodeSplit %+v\nthe library %+v", data, fast, ref)
	}
	return true
}

// TestDecodeJobsAgreesWithTheLibrary: every field of a job the fast path
// reads comes out as the library decodes it, and what it cannot read
// exactly goes to the library.
func TestDecodeJobsAgreesWithTheLibrary(t *testing.T) {
	split := []string{
		"cluster: c\njobs:\n  - {name: a, schedule: '@daily', handler: noop}\n",
		"jobs:\n  - name: a\n    schedule: \"@every 1s\"\n    partitions: 8\n    timeout: 10s\n    command: [sh, -c, 'echo ${A}']\n" +
			"    fence_command: [\"true\"]\n    fence_url: http://x/f\n    env: {A: b, C: \"\"}\n    pass_env: [HOME]\n" +
			"    misfire: skip\n    catchup_window: 1m\n    history_limit: 3\n    overlap: allow\n    jitter: 2s\n" +
			"    timezone: Europe/Istanbul\n    max_running: 2\n    pool: p\n    handler: noop\n" +
			"    http: {url: 'http://x', method: POST, headers: {K: v}, body: '{}'}\n" +
			"    retries: {max: 2, backoff: 1s, max_backoff: 5s}\n" +
			"    notify: [{on: [failure], webhook: 'http://n'}]\n    labels: {team: t}\n    placement: {labels: {zone: a}}\n" +
			"    after: [b, {job: c, outcome: [success]}]\n" +
			"  - {name: b, schedule: '@hourly', command: [], env: {}, notify: []}\n" +
			"pools: {p: 2}\nmembership: {lease_ttl: 6s}\nnotify: [{on: [failure], webhook: 'http://n'}]\n",
		// A nested field the library refuses is the library's error.
		"jobs:\n  - {name: a, schedule: '@daily', http: {url: x, nope: 1}}\n",
	}
	for _, data := range split {
		f, _ := parser.ParseBytes([]byte(data), 0)
		var raw rawCatalog
		if ok, _ := decodeSplit(f.Docs[0].Body, &raw); ok && len(raw.Jobs) == 0 {
			t.Fatalf("%q: split without jobs", data)
		}
		agreement(t, []byte(data))
	}
	if !agreement(t, []byte(split[1])) {
		t.Fatalf("the fast path did not read a job of every field")
	}
	for f := range reflect.TypeFor[rawJob]().Fields() { // a field added to rawJob is added above too
		if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); !strings.Contains(split[1], " "+tag+": ") {
			t.Fatalf("rawJob's field %s (%q) is not in the job of every field", f.Name, tag)
		}
	}
	library := []string{
		"jobs:\n  - &x {name: a, schedule: '@daily'}\n  - *x\n",
		"base: &b {schedule: '@daily'}\njobs:\n  - {<<: *b, name: a}\n",
		"jobs:\n  - {name: !!str a, schedule: '@daily'}\n",
		"jobs:\n  - {name: a, name: b, schedule: '@daily'}\n",
		"jobs:\n  - {name: a, schedule: '@daily', nope: 1}\n",
		"jobs:\n  - {name: a, schedule: '@daily', partitions: '8'}\n",
		"jobs:\n  - {name: a, schedule: '@daily', partitions: 8.0}\n",
		"jobs:\n  - {name: 12, schedule: '@daily'}\n",
		"jobs:\n  - {name: a, schedule: '@daily', timeout: null}\n",
		"jobs:\n  - {name: a, schedule: '@daily', command: [a, 1]}\n",
		"jobs:\n  - {name: a, schedule: '@daily', env: {A: 1}}\n",
		"jobs:\n  - {name: a, schedule: '@daily', env: {A: a, A: b}}\n",
		"jobs:\n  - {name: a, schedule: '@daily', retries: *r}\n",
		"jobs:\n  - name: a\n    schedule: |\n      @daily\n",
		"jobs:\n  - a\n",
		"jobs:\n  -\n",
		"jobs: &j\n  - {name: a, schedule: '@daily'}\n",
		"jobs: []\njobs: []\n",
		"jobs: {}\n",
		"cluster: c\n",
		"- a\n",
	}
	for _, data := range library {
		if agreement(t, []byte(data)) {
			t.Errorf("the fast path read %q, which only the library reads exactly", data)
		}
	}
}

// FuzzDecodeJobs: whatever the document, the fast path reads it as the
// library does, or leaves it to the library.
func FuzzDecodeJobs(f *testing.F) {
	for _, seed := range []string{"../examples/catalog.yaml", "../examples/fenced-sql/catalog.yaml", "../examples/fenced-http/catalog.yaml"} {
		if data, err := os.ReadFile(seed); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("jobs:\n  - {name: a, schedule: '@daily', partitions: 2, env: {A: b}, retries: {max: 1}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		defer func() { recover() }() // the library's own panics are FuzzParse's concern
		agreement(t, data)
	})
}
