package config

import (
	"fmt"
	"strings"
	"testing"
)

// A job's labels are checked in Kubernetes' syntax and bounded, kept as
// written, and written back out by Marshal and MarshalJob.
func TestJobLabels(t *testing.T) {
	cat := mustParse(t, "cluster: c\njobs:\n  - {name: a, schedule: '@hourly', handler: noop, labels: {team: growth, tier: gold}}\n")
	if j, _ := cat.Job("a"); j.Labels["team"] != "growth" || j.Labels["tier"] != "gold" || j.Placement != nil {
		t.Fatalf("labels %+v placement %+v", j.Labels, j.Placement)
	}
	j, _ := cat.Job("a")
	y, err := MarshalJob(j)
	if err != nil || !strings.Contains(string(y), "team: growth") {
		t.Fatalf("MarshalJob: %s %v", y, err)
	}
	var many strings.Builder
	for i := range maxJobLabels + 1 {
		many.WriteString(fmt.Sprintf("k%d: v, ", i))
	}
	for _, tc := range []struct{ labels, want string }{
		{"{'-bad': x}", `c.yaml:3:68: jobs[0].labels.-bad: label key "-bad"`},
		{"{team: 'two words'}", `jobs[0].labels.team: label team: value "two words"`},
		{"{" + many.String() + "}", "jobs[0].labels: 65 labels, over the limit of 64"},
	} {
		_, err := Parse("c.yaml", []byte("cluster: c\njobs:\n  - {name: a, schedule: '@hourly', handler: noop, labels: "+tc.labels+"}\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("labels %.40s: %v; want %q", tc.labels, err, tc.want)
		}
	}
}
