package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/shard"
)

// byAssignment reports whether every slot is owned as the assignment over
// the members its job's placement admits (placed: job → member names)
// places it, all those members being in the view.
func byAssignment(t *testing.T, st ops.Status, placed map[string][]string) bool {
	idOf := map[string]string{}
	for _, m := range st.Members {
		idOf[m.Name] = m.ID
	}
	var js []shard.Job
	for _, s := range st.Slots {
		if len(js) == 0 || js[len(js)-1].Name != s.Job {
			var ids []string
			for _, name := range placed[s.Job] {
				if idOf[name] == "" {
					return false
				}
				ids = append(ids, idOf[name])
			}
			js = append(js, shard.Job{Name: s.Job, Members: ids})
		}
		js[len(js)-1].Partitions++
	}
	a, err := shard.Assign(js)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Slots {
		if s.Owner != a.Owner(shard.Slot{Job: s.Job, Partition: s.Partition}) {
			return false
		}
	}
	return true
}

const placedCatalog = `cluster: placed
membership: {lease_ttl: 2s}
jobs:
  - {name: train, schedule: "@every 1s", partitions: 40, command: ["true"], placement: {labels: {gpu: "true"}}}
  - {name: plain, schedule: "@every 1s", partitions: 40, command: ["true"]}
  - {name: tpu, schedule: "@every 1s", command: ["true"], placement: {labels: {tpu: v5}}}
`

// Placement with four members of two labels: a job's slots go only to the
// members with its labels, split evenly over them, and move only among
// them on kill -9; a job without placement spreads over all four; a job no
// member matches is reported (kira status, kira jobs, the metric), and a
// member with its labels takes it when it joins.
func TestPlacementByLabels(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	catalog := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(catalog, []byte(placedCatalog), 0o600)
	addr := freePort(t)
	members := map[string]*proc{}
	for _, m := range []struct{ name, label string }{{"a", "gpu=true"}, {"b", "gpu=true,zone=x"}, {"c", "gpu=false"}, {"d", ""}} {
		args := []string{"run", "--catalog", catalog, "--etcd", ep, "--name", m.name}
		if m.label != "" {
			args = append(args, "--label", m.label)
		}
		if m.name == "c" {
			args = append(args, "--http", addr)
		}
		members[m.name] = start(t, args...)
	}
	// owners counts, by member name, the owned slots of job.
	owners := func(st ops.Status, job string) (map[string]int, int) {
		names := map[string]string{}
		for _, m := range st.Members {
			names[m.ID] = m.Name
		}
		n, owned := map[string]int{}, 0
		for _, s := range st.Slots {
			if s.Job == job && s.Owner != "" {
				n[names[s.Owner]]++
				owned++
			}
		}
		return n, owned
	}
	var st ops.Status
	kiratest.WaitUntil(t, "train on a and b as the assignment places it, plain on all four", 30*time.Second, func() bool {
		st = statusOf(t, ep, "placed")
		return len(st.Members) == 4 && byAssignment(t, st, map[string][]string{"train": {"a", "b"}, "plain": {"a", "b", "c", "d"}})
	})
	train, _ := owners(st, "train")
	plain, _ := owners(st, "plain")
	if train["a"] != 20 || train["b"] != 20 || plain["a"] != 10 || plain["b"] != 10 || plain["c"] != 10 || plain["d"] != 10 {
		t.Fatalf("train's 40 slots over a and b: %v; plain's 40 over all four: %v; want even splits", train, plain)
	}
	if len(st.Unplaced) != 1 || st.Unplaced[0] != "tpu" {
		t.Fatalf("unplaced %v, want [tpu]", st.Unplaced)
	}
	out, code := runKira(t, "jobs", "--etcd", ep, "--cluster", "placed", "-o", "json")
	var js []ops.JobStatus
	if code != 0 || json.Unmarshal([]byte(out), &js) != nil || len(js) != 3 {
		t.Fatalf("kira jobs: exit %d\n%s", code, out)
	}
	eligible, placement := map[string]int{}, map[string]string{}
	for _, j := range js {
		eligible[j.Name], placement[j.Name] = j.EligibleMembers, j.Placement
	}
	if eligible["train"] != 2 || eligible["plain"] != 4 || eligible["tpu"] != 0 || placement["train"] != "gpu=true" || placement["plain"] != "" {
		t.Fatalf("eligible members %v, placement %v", eligible, placement)
	}
	if _, metrics := get("http://" + addr + "/metrics"); !strings.Contains(metrics, `kira_job_eligible_members{kira_job="tpu"} 0`) || !strings.Contains(metrics, `kira_job_eligible_members{kira_job="train"} 2`) {
		t.Fatalf("metrics lack kira_job_eligible_members:\n%s", metrics)
	}
	if !strings.Contains(members["c"].Output(), "no live member matches the job's placement") {
		t.Fatalf("c did not log the unplaced job:\n%s", members["c"].Output())
	}

	members["a"].Cmd.Process.Kill()
	kiratest.WaitUntil(t, "a's train slots on b alone, its plain slots on b, c and d as the assignment places them", 30*time.Second, func() bool {
		st = statusOf(t, ep, "placed")
		return len(st.Members) == 3 && byAssignment(t, st, map[string][]string{"train": {"b"}, "plain": {"b", "c", "d"}})
	})

	// A member with the labels joins (its labels from the environment): it takes the job.
	t.Setenv("KIRA_RUN_LABEL", "tpu=v5")
	start(t, "run", "--cluster", "placed", "--etcd", ep, "--name", "e")
	kiratest.WaitUntil(t, "e to take tpu", 30*time.Second, func() bool {
		st = statusOf(t, ep, "placed")
		tpu, owned := owners(st, "tpu")
		return owned == 1 && tpu["e"] == 1 && len(st.Unplaced) == 0
	})
}
