package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/goccy/go-yaml/token"
)

// piecesAgree decodes data in n pieces and whole: ok says whether the
// pieces read it, and when they did, the whole parse must read it alike,
// without an error, and locate every job's fields at the same line and
// column.
func piecesAgree(t *testing.T, data []byte, n int) (ok bool) {
	t.Helper()
	raw, doc, ok := decodePieces(data, n)
	if !ok {
		if doc != nil || !reflect.DeepEqual(raw, rawCatalog{}) {
			t.Fatalf("pieces declined %q but decoded %+v", data, raw)
		}
		return false
	}
	whole, wdoc, err := decodeWhole("f.yaml", data)
	if err != nil {
		t.Fatalf("%q: the pieces read it, the whole parse refused it: %v", data, err)
	}
	if !reflect.DeepEqual(raw, whole) {
		t.Fatalf("%q:\npieces %+v\nwhole  %+v", data, raw, whole)
	}
	for i := range raw.Jobs {
		for _, field := range []string{"", "name", "schedule", "env"} {
			p := root("jobs").index(i)
			if field != "" {
				p = p.child(field)
			}
			samePlace(t, data, p, doc, wdoc)
		}
	}
	for _, key := range []string{"cluster", "membership", "pools", "jobs"} {
		samePlace(t, data, root(key), doc, wdoc)
	}
	return true
}

// samePlace fails unless pieces and whole place the field at p alike: at
// the same line, and column but for a field with no value (the library
// places it after its key by what follows it, which a piece's end cuts off).
func samePlace(t *testing.T, data []byte, p fieldPath, pieces, whole *document) {
	t.Helper()
	pl, pc := pieces.position(p)
	wl, wc := whole.position(p)
	null := false
	if tk := whole.token(p); tk != nil {
		null = tk.Type == token.ImplicitNullType
	}
	if pl != wl || pc != wc && !null {
		t.Fatalf("%q: %s at %d:%d in pieces, %d:%d whole", data, p, pl, pc, wl, wc)
	}
}

// jobsList is n jobs in the style of item(i), under a jobs: key.
func jobsList(n int, item func(i int) string) string {
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range n {
		b.WriteString(item(i))
	}
	return b.String()
}

// TestPiecesAgreeWithTheWholeParse: a jobs: list parsed in pieces reads as
// the whole parse reads it, its fields found at the same places; what the
// pieces cannot read so goes to the whole parse.
func TestPiecesAgreeWithTheWholeParse(t *testing.T) {
	flow := func(i int) string { return fmt.Sprintf("  - {name: j%d, schedule: '@daily', handler: noop}\n", i) }
	block := func(i int) string {
		return fmt.Sprintf("  # job %d\n  - name: j%d\n    schedule: \"@every %ds\"\n\n    env:\n      A: |\n        line one\n        - not an item\n      B: \"two\n        lines\"\n    command: [sh, -c,\n      'echo']\n", i, i, i+1)
	}
	margin := func(i int) string { return fmt.Sprintf("- name: j%d\n  schedule: '@hourly'\n# between\n", i) }
	read := []string{
		"cluster: c\n" + jobsList(40, flow),
		"cluster: c\nmembership: {lease_ttl: 6s}\n" + jobsList(40, block) + "pools:\n  p: 2\n",
		jobsList(40, margin) + "cluster: c\n",
		"# a catalog\ncluster: c\n\n" + jobsList(40, flow) + "\n# the end\n",
	}
	for _, data := range read {
		for _, n := range []int{2, 3, 7} {
			if !piecesAgree(t, []byte(data), n) {
				t.Errorf("the pieces declined %q in %d", data, n)
			}
		}
	}
	declined := []string{
		// An anchor in one piece and its alias in another.
		"jobs:\n  - &a {name: a, schedule: '@daily'}\n  - {name: b, schedule: '@daily'}\n  - *a\n",
		// A setting's anchor merged into the jobs.
		"base: &b {schedule: '@daily'}\n" + jobsList(6, func(i int) string { return fmt.Sprintf("  - {<<: *b, name: j%d}\n", i) }),
		"jobs: # the list\n" + jobsList(6, flow)[6:],
		jobsList(3, flow) + jobsList(3, flow),
		"---\n" + jobsList(6, flow),
		strings.ReplaceAll(jobsList(6, flow), "\n", "\r\n"),
		// A quoted string whose second line looks like an item.
		"jobs:\n  - {name: a, schedule: '@daily'}\n  - name: \"b\n  - c\"\n    schedule: '@daily'\n  - {name: d, schedule: '@daily'}\n",
		// A line indented less than the items but not at the margin.
		"jobs:\n    - {name: a, schedule: '@daily'}\n    - {name: b, schedule: '@daily'}\n  x: 1\n",
		// A top-level string that holds a line "jobs:".
		"cluster: \"c\njobs:\n  - {name: a, schedule: '@daily'}\n  - {name: b, schedule: '@daily'}\n  - {name: c, schedule: '@daily'}\n\"\n",
		// The list's lines inside a flow mapping, which only the library's
		// leniency reads as a list.
		"{cluster: c,\njobs:\n  - {name: a, schedule: '@daily'}\n  - {name: b, schedule: '@daily'}\n  - {name: c, schedule: '@daily'}\n}\n",
		// An unknown field: the whole parse gives its error.
		jobsList(6, flow) + "nope: 1\n",
		jobsList(5, flow) + "  - {name: x, schedule: '@daily', nope: 1}\n",
		// Fewer items than pieces.
		jobsList(1, flow),
	}
	for _, data := range declined {
		if piecesAgree(t, []byte(data), 3) {
			t.Errorf("the pieces read %q, which only the whole parse reads exactly", data)
		}
	}
}

// TestAProblemInALaterPieceNamesItsLine: a job's problem in a catalog large
// enough to be parsed in pieces names its own line and field.
func TestAProblemInALaterPieceNamesItsLine(t *testing.T) {
	bad := 9000
	var b strings.Builder
	b.WriteString("cluster: c\njobs:\n")
	for i := range 10000 {
		schedule := "@daily"
		if i == bad {
			schedule = "every day"
		}
		fmt.Fprintf(&b, "  - {name: customer-%06d, schedule: '%s', handler: noop}\n", i, schedule)
	}
	data := []byte(b.String())
	if piecesFor(len(data)) < 2 {
		t.Fatalf("a catalog of %d bytes is parsed whole", len(data))
	}
	_, _, err := Lint("f.yaml", data)
	want := fmt.Sprintf("f.yaml:%d:", bad+3)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("jobs[%d].schedule", bad)) {
		t.Fatalf("want a problem at %s (jobs[%d].schedule), got %v", want, bad, err)
	}
}

// FuzzPieces: whatever the document, the pieces read it as the whole parse
// does, or leave it to the whole parse.
func FuzzPieces(f *testing.F) {
	f.Add([]byte(jobsList(4, func(i int) string { return fmt.Sprintf("  - {name: j%d, schedule: '@daily'}\n", i) })), 2)
	f.Add([]byte("cluster: c\njobs:\n- name: a\n  env: {A: b}\n- name: b\n  command: [x]\npools: {p: 1}\n"), 2)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		if n < 2 || n > 8 {
			return
		}
		defer func() { recover() }() // the library's own panics are FuzzParse's concern
		piecesAgree(t, data, n)
	})
}

// BenchmarkDecode100000Jobs: decoding the catalog of 100,000 one-line jobs
// (docs/benchmarks.md, "Many jobs") in one parse of the whole document, and
// in pieces on every processor.
func BenchmarkDecode100000Jobs(b *testing.B) {
	data := []byte(jobsList(100000, func(i int) string {
		return fmt.Sprintf("  - {name: customer-%06d, schedule: '@daily', handler: noop}\n", i)
	}))
	for _, bc := range []struct {
		name   string
		decode func(string, []byte) (rawCatalog, *document, error)
	}{{"whole", decodeWhole}, {"pieces", decode}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				raw, _, err := bc.decode("f.yaml", data)
				if err != nil || len(raw.Jobs) != 100000 {
					b.Fatalf("%d jobs, %v", len(raw.Jobs), err)
				}
			}
		})
	}
}
