package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

const chain = `jobs:
  - name: extract
    schedule: "@hourly"
    partitions: 3
    handler: noop
  - name: transform
    after: [extract]
    partitions: 2
    handler: noop
  - name: report
    after: [{job: transform, outcome: [succeeded, skipped]}, extract]
    handler: noop
`

func TestAfterParsesBothForms(t *testing.T) {
	cat, err := Parse("c.yaml", []byte(chain))
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := cat.Job("transform")
	rep, _ := cat.Job("report")
	if !tr.Dependent() || !reflect.DeepEqual(tr.After, []Upstream{{Job: "extract"}}) {
		t.Fatalf("transform.After = %+v", tr.After)
	}
	want := []Upstream{{Job: "transform", Outcomes: []string{"succeeded", "skipped"}}, {Job: "extract"}}
	if !reflect.DeepEqual(rep.After, want) {
		t.Fatalf("report.After = %+v, want %+v", rep.After, want)
	}
	if !rep.After[0].Allows("skipped") || rep.After[1].Allows("failed") || !rep.After[1].Allows("succeeded") {
		t.Fatal("Allows does not follow outcome:")
	}
	if sched, err := tr.ParsedSchedule(); err != nil || !sched.Next(time.Now()).IsZero() {
		t.Fatalf("a dependent's schedule fires: %v", err)
	}
	if got := cat.Dependents()["extract"]; !reflect.DeepEqual(got, []string{"transform", "report"}) {
		t.Fatalf("dependents of extract = %v", got)
	}
	out, err := Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("again.yaml", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !reflect.DeepEqual(again.Jobs, cat.Jobs) {
		t.Fatalf("round trip changed the jobs:\n%s", out)
	}
}

func TestAfterValidation(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"missing upstream", `jobs:
  - name: a
    schedule: "@hourly"
    handler: noop
  - name: b
    after: [nope]
    handler: noop
`, `c.yaml:6:13: jobs[1].after[0]: job "b" runs after "nope", which is not a job of the catalog`},
		{"cycle", `jobs:
  - name: a
    schedule: "@hourly"
    handler: noop
  - name: b
    after: [a, d]
    handler: noop
  - name: c
    after: [b]
    handler: noop
  - name: d
    after: [c]
    handler: noop
`, `c.yaml:9:13: jobs[2].after[0]: after: makes a cycle (b → d → c → b): a job cannot run after itself`},
		{"itself", `jobs:
  - name: a
    after: [a]
    handler: noop
`, `c.yaml:3:13: jobs[0].after[0]: after: makes a cycle (a → a)`},
		{"schedule on a dependent", `jobs:
  - name: a
    schedule: "@hourly"
    handler: noop
  - name: b
    schedule: "@daily"
    after: [a]
    handler: noop
`, `c.yaml:6:15: jobs[1].schedule: a job with after: fires when its upstream jobs end: remove its schedule`},
		{"unknown outcome", `jobs:
  - name: a
    schedule: "@hourly"
    handler: noop
  - name: b
    after:
      - job: a
        outcome: [succeeded, done]
    handler: noop
`, `c.yaml:8:30: jobs[1].after[0].outcome[1]: outcome "done" is not one of`},
		{"named twice", `jobs:
  - name: a
    schedule: "@hourly"
    handler: noop
  - name: b
    after: [a, a]
    handler: noop
`, `jobs[1].after[1].job: job "a" is named twice`},
		{"empty", `jobs:
  - name: b
    after: []
    handler: noop
`, `c.yaml:3:12: jobs[0].after: after: is empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.yaml))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a located error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err =\n%v\nwant it to contain\n%s", err, tc.want)
			}
		})
	}
}

// kira apply's diff shows after: as the catalog writes it.
func TestDiffShowsAfter(t *testing.T) {
	prev, err := Parse("c.yaml", []byte(chain))
	if err != nil {
		t.Fatal(err)
	}
	next, err := Parse("c.yaml", []byte(strings.Replace(chain, "after: [extract]", "after: [{job: extract, outcome: [succeeded, failed]}]", 1)))
	if err != nil {
		t.Fatal(err)
	}
	changes := Diff(prev, next)
	if len(changes) != 1 || !strings.Contains(changes[0].String(), "after: [extract] → [extract (outcome succeeded, failed)]") {
		t.Fatalf("diff %v", changes)
	}
}
