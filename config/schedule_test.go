package config

import (
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
