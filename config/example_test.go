package config_test

import (
	"fmt"
	"time"

	"github.com/kira-scheduler/kira/config"
)

func ExampleParse() {
	_, err := config.Parse("catalog.yaml", []byte(`
jobs:
  - name: billing-run
    schedule: "0 3 * * *"
    partitions: 0
`))
	fmt.Println(err)
	// Output:
	// catalog.yaml:5:17: jobs[0].partitions: partitions must be between 1 and 100000, got 0
	// catalog.yaml:3:9: jobs[0]: job "billing-run" has no executor: set one of command, http or handler
}

func ExampleParseSchedule() {
	s, _ := config.ParseSchedule("@every 10s")
	// Two members that started at different moments agree on the next fire.
	a := s.Next(time.Date(2026, 11, 29, 12, 0, 3, 0, time.UTC))
	b := s.Next(time.Date(2026, 11, 29, 12, 0, 8, 0, time.UTC))
	fmt.Println(a.Format(time.TimeOnly), b.Format(time.TimeOnly))
	// Output: 12:00:10 12:00:10
}
