package config

import (
	"strings"
	"testing"
	"time"
)

func TestEveryIsAnchoredNotRelativeToStart(t *testing.T) {
	s, err := ParseSchedule("@every 10s")
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	// Two members starting at different moments agree on the grid.
	a := s.Next(base.Add(3 * time.Second))
	b := s.Next(base.Add(7*time.Second + 123*time.Millisecond))
	if !a.Equal(b) || !a.Equal(base.Add(10*time.Second)) {
		t.Fatalf("Next = %v and %v; want both %v", a, b, base.Add(10*time.Second))
	}
	if got := s.Next(a); !got.Equal(a.Add(10 * time.Second)) {
		t.Fatalf("Next(on the grid) = %v; want the following point", got)
	}
}

func TestCronForms(t *testing.T) {
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := map[string]time.Time{
		"*/5 * * * *":                        base.Add(5 * time.Minute),
		"30 * * * * *":                       base.Add(30 * time.Second),
		"@hourly":                            base.Add(time.Hour),
		"CRON_TZ=Europe/Istanbul 0 16 * * *": time.Date(2026, 11, 29, 13, 0, 0, 0, time.UTC),
	}
	for spec, want := range cases {
		s, err := ParseSchedule(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if got := s.Next(base); !got.Equal(want) {
			t.Errorf("%s: Next = %v; want %v", spec, got, want)
		}
	}
}

func runsBetween(t *testing.T, s Schedule, from, to time.Time) []time.Time {
	t.Helper()
	var out []time.Time
	for at := s.Next(from); !at.IsZero() && at.Before(to); at = s.Next(at) {
		out = append(out, at)
		if len(out) > 1000 {
			t.Fatal("runaway schedule")
		}
	}
	return out
}

// Daylight-saving changes follow Vixie cron's rule: a fixed-time job runs
// exactly once on the day of either change.
func TestDaylightSavingChanges(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	cases := []struct {
		name, spec string
		day        time.Time // local midnight of the day of the change
		want       []string  // local times of that day's runs
	}{
		// 2026-03-08: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist.
		{"skipped 02:30 runs once after the jump", "30 2 * * *", time.Date(2026, 3, 8, 0, 0, 0, 0, ny), []string{"03:00 EDT"}},
		{"hourly follows the new clock", "0 * * * *", time.Date(2026, 3, 8, 0, 0, 0, 0, ny), []string{"00:00 EST", "01:00 EST", "03:00 EDT", "04:00 EDT"}},
		// 2026-11-01: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
		{"repeated 01:30 runs once", "30 1 * * *", time.Date(2026, 11, 1, 0, 0, 0, 0, ny), []string{"01:30 EDT"}},
		{"wildcard minute runs in both passes", "30 * * * *", time.Date(2026, 11, 1, 0, 0, 0, 0, ny), []string{"00:30 EDT", "01:30 EDT", "01:30 EST"}},
		{"ordinary day", "30 2 * * *", time.Date(2026, 3, 9, 0, 0, 0, 0, ny), []string{"02:30 EDT"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseScheduleIn(tc.spec, "America/New_York")
			if err != nil {
				t.Fatal(err)
			}
			from := tc.day.Add(-time.Nanosecond)
			to := tc.day.Add(3*time.Hour + 1) // past the change
			if len(tc.want) == 1 {
				to = tc.day.AddDate(0, 0, 1)
			}
			var got []string
			for _, at := range runsBetween(t, s, from, to) {
				got = append(got, at.In(ny).Format("15:04 MST"))
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("runs %v; want %v", got, tc.want)
			}
		})
	}
}

func TestScheduleZones(t *testing.T) {
	base := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	// No zone means UTC, whatever the process's local zone.
	s, _ := ParseSchedule("0 13 * * *")
	if got := s.Next(base); !got.Equal(base.Add(time.Hour)) {
		t.Fatalf("default zone: %v", got)
	}
	s, _ = ParseScheduleIn("0 16 * * *", "Europe/Istanbul") // UTC+3
	if got := s.Next(base); !got.Equal(base.Add(time.Hour)) {
		t.Fatalf("timezone Europe/Istanbul: %v", got)
	}
	if _, err := ParseScheduleIn("CRON_TZ=UTC 0 * * * *", "Europe/Istanbul"); err == nil {
		t.Fatal("both CRON_TZ and timezone accepted")
	}
	if _, err := ParseScheduleIn("0 * * * *", "Mars/Olympus"); err == nil {
		t.Fatal("unknown zone accepted")
	}
}
