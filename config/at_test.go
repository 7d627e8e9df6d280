package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An @at schedule gives its time once: from any earlier instant, and
// never after it.
func TestAtScheduleFiresOnce(t *testing.T) {
	s, err := ParseScheduleIn("@at 2027-01-01T09:00:00+03:00", "Europe/Istanbul")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2027, 1, 1, 6, 0, 0, 0, time.UTC)
	for _, from := range []time.Time{{}, at.Add(-time.Hour), at.Add(-time.Nanosecond)} {
		if got := s.Next(from); !got.Equal(at) {
			t.Fatalf("Next(%s) = %s; want %s", from, got, at)
		}
	}
	for _, from := range []time.Time{at, at.Add(time.Nanosecond), at.Add(24 * time.Hour)} {
		if got := s.Next(from); !got.IsZero() {
			t.Fatalf("Next(%s) = %s; want none", from, got)
		}
	}
	j := Job{Name: "a", Schedule: "@at 2027-01-01T09:00:00+03:00"}
	if fires, err := j.Upcoming(at.Add(-48*time.Hour), 5); err != nil || len(fires) != 1 || !fires[0].Equal(at) {
		t.Fatalf("Upcoming = %v, %v; want the one fire %s", fires, err, at)
	}
}

// An @at time must be RFC 3339 with a zone; a past one is an error naming
// file, line and field when a file is checked (not when a member reads
// it), a warning under a misfire policy that runs a missed fire late.
func TestAtValidation(t *testing.T) {
	job := func(schedule, extra string) string {
		return "jobs:\n  - name: a\n    schedule: '" + schedule + "'\n    handler: h\n" + extra
	}
	cases := []struct {
		name, yaml string
		field, msg string
	}{
		{"no zone", job("@at 2027-01-01T09:00:00", ""), "jobs[0].schedule", "RFC 3339 time with its zone"},
		{"no time", job("@at", ""), "jobs[0].schedule", "RFC 3339 time with its zone"},
		{"not a time", job("@at tomorrow", ""), "jobs[0].schedule", "RFC 3339 time with its zone"},
		{"past", job("@at 2020-01-01T09:00:00+03:00", ""), "jobs[0].schedule", "is past"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Lint("at.yaml", []byte(tc.yaml))
			var cerr *Error
			if !errors.As(err, &cerr) || len(cerr.Problems) != 1 {
				t.Fatalf("Lint error = %v; want one problem", err)
			}
			if p := cerr.Problems[0]; p.File != "at.yaml" || p.Line != 3 || p.Field != tc.field || !strings.Contains(p.Message, tc.msg) {
				t.Fatalf("problem %q; want at.yaml:3 %s: …%s…", p, tc.field, tc.msg)
			}
		})
	}
	past := job("@at 2020-01-01T09:00:00+03:00", "    misfire: fire-once\n")
	cat, warnings, err := Lint("at.yaml", []byte(past))
	if err != nil || len(warnings) != 1 || warnings[0].Line != 3 || warnings[0].Field != "jobs[0].schedule" || !strings.Contains(warnings[0].Message, "is past") {
		t.Fatalf("past @at under fire-once: %v, warnings %v; want valid with one warning at line 3", err, warnings)
	}
	if at, ok := cat.Jobs[0].At(); !ok || !at.Equal(time.Date(2020, 1, 1, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("At = %s, %t", at, ok)
	}
	// A member reading its catalog file (Parse) runs it: the job never fires.
	if _, err := Parse("at.yaml", []byte(job("@at 2020-01-01T09:00:00+03:00", ""))); err != nil {
		t.Fatalf("Parse of a past @at: %v; want valid", err)
	}
	if _, _, err := Lint("at.yaml", []byte(job("@at 2099-01-01T09:00:00Z", ""))); err != nil {
		t.Fatalf("a future @at: %v", err)
	}
	// A catalog directory is checked the same way.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "jobs.yaml"), []byte(job("@at 2020-01-01T09:00:00Z", "")), 0o600)
	if _, _, err := LintDir(dir); err == nil || !strings.Contains(err.Error(), "jobs.yaml:3:") || !strings.Contains(err.Error(), "is past") {
		t.Fatalf("LintDir of a past @at: %v", err)
	}
}
