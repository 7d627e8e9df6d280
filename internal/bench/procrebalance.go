package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// rebalanceCatalog is rebalance's load for `kira run` processes: idle
// slots (hourly jobs nobody waits for), since ownership is what is
// measured; n slots of one job, or (many) of jobs of 1 to 16 partitions
// (smallJobs). It returns the catalog and its shape.
func rebalanceCatalog(cluster string, n int, many bool) (string, string) {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster: %s\nmembership:\n  lease_ttl: 6s\njobs:\n", cluster)
	jobs := []config.Job{{Name: "idle", Partitions: n}}
	shape := "one job"
	if many {
		jobs = smallJobs(config.Job{}, n)
		shape = fmt.Sprintf("%d jobs of 1–16", len(jobs))
	}
	for _, j := range jobs {
		fmt.Fprintf(&b, "  - {name: %s, schedule: \"@hourly\", partitions: %d, command: [\"true\"]}\n", j.Name, j.Partitions)
	}
	return b.String(), shape
}

// procRebalance is rebalance with the members as `kira run` processes of
// the bench's binary: n idle slots (of one job, or of many small ones)
// over three members, a fourth joins, then leaves (SIGTERM). Who leads
// what is read from etcd (the election keys, as kira status reads them),
// so a settle is known within one read of every election key, tens of
// milliseconds at 10,000 slots. For one job it also measures what the idle
// slots cost the three members' memory (Memory).
func procRebalance(cfg Config, n int, many bool) ([]Rebalance, *Memory, error) {
	dir, err := os.MkdirTemp("", "kira-bench-rebalance")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	name := cluster("prod-rebalance")
	catalog := filepath.Join(dir, "catalog.yaml")
	yaml, shape := rebalanceCatalog(name, n, many)
	if err := os.WriteFile(catalog, []byte(yaml), 0o600); err != nil {
		return nil, nil, err
	}
	cli, err := etcdclient.New(cfg.Etcd)
	if err != nil {
		return nil, nil, err
	}
	defer cli.Close()
	var procs []*memberProc
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	var base *memberMemory
	if !many {
		if base, err = baseMemory(cfg, dir); err != nil {
			return nil, nil, err
		}
	}
	for i := range 3 {
		p, err := startServingProc(cfg, dir, catalog, fmt.Sprintf("m%d", i))
		if err != nil {
			return nil, nil, err
		}
		procs = append(procs, p)
	}
	var owners map[shard.Slot]string // as of the last settled read
	settled := func(members int) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			o, ok, err := preferredOwners(ctx, cli, name, members, n)
			if ok {
				owners = o
			}
			return ok, err
		}
	}
	if err := waitProcs(procs, 5*time.Minute, settled(3)); err != nil {
		return nil, nil, fmt.Errorf("bench: rebalance with processes, while the slots were being taken: %w", err)
	}
	var mem *Memory
	if base != nil {
		time.Sleep(memorySettle)
		mem = idleMemory(procs, n, *base)
	}
	var out []Rebalance
	measure := func(change string, act func() error, members int) error {
		before := owners
		start := time.Now()
		if err := act(); err != nil {
			return err
		}
		if err := waitProcs(procs, 5*time.Minute, settled(members)); err != nil {
			return fmt.Errorf("bench: rebalance %s with processes: %w", change, err)
		}
		out = append(out, Rebalance{Change: change, Shape: shape, Slots: n, Moved: movedShare(before, owners, n), Ideal: 0.25, Settle: time.Since(start)})
		return nil
	}
	if err := measure("3→4", func() error {
		p, err := startProc(cfg, dir, catalog, "m3")
		if err == nil {
			procs = append(procs, p)
		}
		return err
	}, 4); err != nil {
		return out, mem, err
	}
	return out, mem, measure("4→3", func() error {
		fourth := procs[3]
		procs = procs[:3]
		fourth.stop()
		return nil
	}, 3)
}

// memorySettle is how long the members idle after every slot is led
// before their memory is read: a collection or two after the takeovers.
const memorySettle = 5 * time.Second

// memberMemory is a member's live heap and resident memory, from its
// /metrics.
type memberMemory struct{ heap, rss float64 }

func readMemory(p *memberProc) (memberMemory, bool) {
	m := scrape(p.metrics)
	heap, ok1 := m["go_gc_heap_live_bytes"]
	rss, ok2 := m["process_resident_memory_bytes"]
	return memberMemory{heap: heap, rss: rss}, ok1 && ok2
}

// baseMemory is the memory of a member of a cluster of its own holding one
// idle slot: what the idle slots' cost is counted from.
func baseMemory(cfg Config, dir string) (*memberMemory, error) {
	name := cluster("prod-base")
	catalog := filepath.Join(dir, "base.yaml")
	yaml, _ := rebalanceCatalog(name, 1, false)
	if err := os.WriteFile(catalog, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	cli, err := etcdclient.New(cfg.Etcd)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	p, err := startServingProc(cfg, dir, catalog, "base")
	if err != nil {
		return nil, err
	}
	defer p.stop()
	procs := []*memberProc{p}
	if err := waitProcs(procs, time.Minute, func(ctx context.Context) (bool, error) {
		_, ok, err := preferredOwners(ctx, cli, name, 1, 1)
		return ok, err
	}); err != nil {
		return nil, fmt.Errorf("bench: the base member for memory: %w", err)
	}
	time.Sleep(memorySettle)
	m, ok := readMemory(p)
	if !ok {
		return nil, fmt.Errorf("bench: the base member's /metrics has no go_gc_heap_live_bytes or process_resident_memory_bytes")
	}
	return &m, nil
}

// idleMemory is what n idle slots cost the three members procs, over base
// each.
func idleMemory(procs []*memberProc, n int, base memberMemory) *Memory {
	var heap, rss float64
	for _, p := range procs {
		m, ok := readMemory(p)
		if !ok {
			return nil
		}
		heap, rss = heap+m.heap-base.heap, rss+m.rss-base.rss
	}
	members := float64(len(procs))
	return &Memory{Slots: n, Members: len(procs), HeapBytes: int64(heap), PerSlotPerMember: heap / float64(n) / members,
		BaseHeapBytes: int64(base.heap), BaseRSSBytes: int64(base.rss), RSSBytes: int64(rss), RSSPer1000PerMember: rss / (float64(n) / 1000) / members}
}

// preferredOwners reads who leads each slot and reports whether the
// cluster has settled: members members, all n slots led, each by the
// member the assignment over them prefers.
func preferredOwners(ctx context.Context, kv clientv3.KV, cluster string, members, n int) (map[shard.Slot]string, bool, error) {
	st, err := ops.ReadStatus(ctx, kv, cluster)
	if err != nil || len(st.Members) != members {
		return nil, false, err
	}
	a, err := statusAssignment(st)
	if err != nil {
		return nil, false, err
	}
	owners := make(map[shard.Slot]string, n)
	for _, s := range st.Slots {
		if s.Owner != "" {
			owners[shard.Slot{Job: s.Job, Partition: s.Partition}] = s.Owner
		}
	}
	return owners, len(owners) == n && misplaced(a, owners) == 0, nil
}

// statusAssignment is the assignment over st's members of the slots st
// lists, for a catalog without placements (the bench's).
func statusAssignment(st *ops.Status) (*shard.Assignment, error) {
	var ids []string
	for _, m := range st.Members {
		ids = append(ids, m.ID)
	}
	var js []shard.Job
	for _, s := range st.Slots {
		if len(js) == 0 || js[len(js)-1].Name != s.Job {
			js = append(js, shard.Job{Name: s.Job, Members: ids})
		}
		js[len(js)-1].Partitions++
	}
	return shard.Assign(js)
}
