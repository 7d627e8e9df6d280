package config

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/internal/etcdtest"
)

const limited = `cluster: c
pools:
  warehouse: 8
  small: 1
jobs:
  - {name: load, schedule: "@every 1s", partitions: 6, command: ["true"], pool: warehouse}
  - {name: export, schedule: "@every 1s", command: ["true"], pool: warehouse}
  - {name: crawl, schedule: "@every 1s", partitions: 6, command: ["true"], max_running: 2}
  - {name: free, schedule: "@every 1s", command: ["true"]}
`

// max_running and pools give each job its Limit; they survive the store
// (per-job layout and the single key) and Marshal.
func TestLimits(t *testing.T) {
	cat, err := Parse("l.yaml", []byte(limited))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Limit{
		"load":   {Pool: "pool/warehouse", N: 8},
		"export": {Pool: "pool/warehouse", N: 8},
		"crawl":  {Pool: "job/crawl", N: 2},
		"free":   {},
	}
	for _, j := range cat.Jobs {
		if got := cat.Limit(j); got != want[j.Name] {
			t.Errorf("%s: limit %+v, want %+v", j.Name, got, want[j.Name])
		}
	}
	if cat.Limit(cat.Jobs[3]).Limited() || !cat.Limit(cat.Jobs[2]).Limited() {
		t.Error("Limited is wrong")
	}
	text, err := Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := Parse("m.yaml", text); err != nil || !reflect.DeepEqual(back, cat) {
		t.Fatalf("Marshal round trip: %v\n%s", err, text)
	}
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	if _, _, err := Store(ctx, cli, cat); err != nil {
		t.Fatal(err)
	}
	back, _, err := LoadStored(ctx, cli, "c")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Pools, cat.Pools) || !reflect.DeepEqual(definitions(back).Jobs, cat.Jobs) {
		t.Fatalf("stored and read back:\n%+v\n%+v", back, cat)
	}
	next := *cat
	next.Pools = map[string]int{"warehouse": 4, "small": 1}
	if d := Diff(cat, &next); len(d) != 1 || !strings.Contains(d[0].String(), "pools: map[small:1 warehouse:8] → map[small:1 warehouse:4]") {
		t.Fatalf("diff %v", d)
	}
}

// Bad limits are refused with their file, line and field.
func TestLimitProblems(t *testing.T) {
	job := func(extra string) string {
		return "cluster: c\npools: {warehouse: 8}\njobs:\n  - {name: j, schedule: \"@every 1s\", command: [\"true\"], " + extra + "}\n"
	}
	for _, bad := range []struct{ yaml, want string }{
		{job("max_running: 0"), "l.yaml:4:70: jobs[0].max_running: max_running must be between 1 and 10000, got 0"},
		{job("max_running: -3"), "jobs[0].max_running: max_running must be between 1 and 10000, got -3"},
		{job("max_running: many"), "l.yaml:4:70: field \"max_running\": \"many\" is not of type int"},
		{job("pool: lake"), "l.yaml:4:63: jobs[0].pool: unknown pool \"lake\": the catalog declares [warehouse]"},
		{job("pool: warehouse, max_running: 2"), "l.yaml:4:63: jobs[0].pool: set pool or max_running, not both"},
		{"cluster: c\njobs:\n  - {name: j, schedule: \"@every 1s\", command: [\"true\"], pool: lake}\n", "jobs[0].pool: unknown pool \"lake\": the catalog declares no pools"},
		{"cluster: c\npools:\n  warehouse: 0\njobs:\n  - {name: j, schedule: \"@every 1s\", command: [\"true\"]}\n", "l.yaml:3:14: pools.warehouse: pool warehouse's limit must be between 1 and 10000, got 0"},
		{"cluster: c\npools:\n  Ware_house: 2\njobs:\n  - {name: j, schedule: \"@every 1s\", command: [\"true\"]}\n", "l.yaml:3:15: pools.Ware_house: \"Ware_house\" is not a valid pool name"},
	} {
		_, err := Parse("l.yaml", []byte(bad.yaml))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: got %v, want %q", bad.yaml, err, bad.want)
		}
	}
	// A pool with a bad limit is still declared: the jobs naming it are
	// not reported again.
	_, err := Parse("l.yaml", []byte("cluster: c\npools: {warehouse: 0}\njobs:\n  - {name: j, schedule: \"@every 1s\", command: [\"true\"], pool: warehouse}\n"))
	if err == nil || strings.Count(err.Error(), "\n") != 0 {
		t.Fatalf("want the one problem of the pool, got %v", err)
	}
}
