package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
)

const chainSelfTestCatalog = `cluster: selftest
jobs:
  - name: up
    schedule: "@every 1s"
    partitions: 2
    misfire: fire-all
    command: ["true"]
  - name: down
    after: [up]
    misfire: fire-all
    command: ["true"]
`

// The chain checker's self-test: a dependent that ran each logical time
// once, after both partitions of its upstream, passes; one that missed a
// time, ran before its upstream ended, ran out of order or ran after an
// upstream partition that did not succeed fails, with a violation that
// says so.
func TestChainsAreJudged(t *testing.T) {
	cat, err := config.Parse("c.yaml", []byte(chainSelfTestCatalog))
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Catalog: cat, From: t0, To: t0.Add(15 * time.Second)}
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	history := func(edit func(i int, h *attemptLog) bool) []Attempt {
		h := &attemptLog{}
		for i := 0; i < 15; i++ {
			if edit != nil && edit(i, h) {
				continue
			}
			h.add(Write, "up", 0, 10, "a", at(i), at(i), Accepted)
			h.add(Write, "up", 1, 10, "a", at(i), at(i), Accepted)
			h.add(Write, "down", 0, 10, "a", at(i), at(i).Add(500*time.Millisecond), Accepted)
		}
		return h.as
	}
	if rep := Check(history(nil), spec); !rep.OK() {
		t.Fatalf("a clean chain fails: %v", rep.Violations)
	}
	for _, tc := range []struct {
		name string
		edit func(i int, h *attemptLog) bool
		want string
	}{
		{"missed", func(i int, h *attemptLog) bool {
			if i != 3 {
				return false
			}
			h.add(Write, "up", 0, 10, "a", at(i), at(i), Accepted)
			h.add(Write, "up", 1, 10, "a", at(i), at(i), Accepted)
			return true
		}, "down/0: logical time 2026-11-30T12:00:03Z never accepted"},
		{"before its upstream", func(i int, h *attemptLog) bool {
			if i != 4 {
				return false
			}
			h.add(Write, "up", 0, 10, "a", at(i), at(i), Accepted)
			h.add(Write, "down", 0, 10, "a", at(i), at(i), Accepted)
			h.add(Write, "up", 1, 10, "a", at(i), at(i), Accepted)
			return true
		}, "down/0: logical time 2026-11-30T12:00:04Z accepted before every upstream partition's was"},
		{"out of order", func(i int, h *attemptLog) bool {
			if i != 5 {
				return false
			}
			h.add(Write, "up", 0, 10, "a", at(5), at(5), Accepted)
			h.add(Write, "up", 1, 10, "a", at(5), at(5), Accepted)
			h.add(Write, "up", 0, 10, "a", at(6), at(6), Accepted)
			h.add(Write, "up", 1, 10, "a", at(6), at(6), Accepted)
			h.add(Write, "down", 0, 10, "a", at(6), at(6), Accepted)
			h.add(Write, "down", 0, 10, "a", at(5), at(6), Accepted)
			return true
		}, "down/0: logical time 2026-11-30T12:00:05Z accepted after 2026-11-30T12:00:06Z (out of order)"},
		{"without its upstream", func(i int, h *attemptLog) bool {
			if i != 7 {
				return false
			}
			h.add(Write, "up", 0, 10, "a", at(i), at(i), Accepted)
			h.add(Write, "up", 1, 10, "a", at(i), at(i), Stale)
			h.add(Write, "down", 0, 10, "a", at(i), at(i), Accepted)
			return true
		}, "down/0: logical time 2026-11-30T12:00:07Z accepted, though not every upstream partition's was"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Check(history(tc.edit), spec)
			if !slicesContain(rep.Violations, tc.want) {
				t.Fatalf("violations %q; want one containing %q", rep.Violations, tc.want)
			}
		})
	}
}

func slicesContain(vs []string, want string) bool {
	for _, v := range vs {
		if strings.Contains(v, want) {
			return true
		}
	}
	return false
}
