package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/keyspace"
	"github.com/kira-scheduler/kira/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// preferredOf is the assignment of cat's jobs over the members' ids: who
// should hold each slot.
func preferredOf(members []*member, cat *config.Catalog) *shard.Assignment {
	var ids []string
	for _, m := range members {
		ids = append(ids, m.id)
	}
	var js []shard.Job
	for _, j := range cat.Jobs {
		js = append(js, shard.Job{Name: j.Name, Partitions: j.Partitions, Members: ids})
	}
	a, _ := shard.Assign(js) // names are unique and partitions positive
	return a
}

// movedShare is the share of n slots whose leader differs from before to after.
func movedShare(before, after map[shard.Slot]string, n int) float64 {
	moved := 0
	for s, o := range after {
		if before[s] != o {
			moved++
		}
	}
	return float64(moved) / float64(n)
}

// misplaced counts the slots of l held by a member the assignment does not prefer.
func misplaced(a *shard.Assignment, l map[shard.Slot]string) int {
	n := 0
	for s, owner := range l {
		if a.Owner(s) != owner {
			n++
		}
	}
	return n
}

// describeMisplaced names up to three slots not held by their preferred
// owner, with the election keys etcd has for each, for a settle that timed
// out.
func describeMisplaced(ms []*member, cat *config.Catalog) string {
	a := preferredOf(ms, cat)
	var out []string
	for s, owner := range leaders(ms) {
		if want := a.Owner(s); want != owner && len(out) < 3 {
			line := fmt.Sprintf("%s held by %s, preferred %s; keys:", s, owner, want)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := ms[0].cli.Get(ctx, keyspace.Election(cat.Cluster, s)+"/", clientv3.WithPrefix())
			cancel()
			if err != nil {
				line += " " + err.Error()
			} else {
				for _, kv := range resp.Kvs {
					line += fmt.Sprintf(" %s=%s@%d", kv.Key, kv.Value, kv.CreateRevision)
				}
			}
			out = append(out, line)
		}
	}
	return strings.Join(out, "; ")
}

// rebalance adds a fourth member to n slots over three, then removes it:
// n slots of one job, or (many) of jobs of 1 to 16 partitions.
func rebalance(cfg Config, n int, many bool) ([]Rebalance, *Memory, error) {
	ev := &events{}
	cat := benchCatalog(cluster("rebalance"), 6*time.Second, n, 0)
	cat.Jobs[0].Schedule = "@hourly" // idle slots: ownership is what is measured
	shape := "one job"
	if many {
		cat.Jobs = smallJobs(cat.Jobs[0], n)
		shape = fmt.Sprintf("%d jobs of 1–16", len(cat.Jobs))
	}
	heapBefore := liveHeap()
	debug.FreeOSMemory()
	rssBefore := residentBytes()
	ms, err := startMembers(cfg, cat, 3, ev.add)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		for _, m := range ms {
			m.stop()
		}
	}()
	// settled is built once per view: the assignment is not free to compute.
	settled := func(members []*member) func() bool {
		a := preferredOf(members, cat)
		return func() bool {
			return leading(members) == n && misplaced(a, leaders(members)) == 0
		}
	}
	check := settled(ms)
	if err := waitFor(5*time.Minute, func() bool { return check() || lostMember(ms) != nil }); err != nil {
		return nil, nil, fmt.Errorf("%w (initial: %d of %d slots held; %s)", err, len(leaders(ms)), n, describeMisplaced(ms, cat))
	}
	if err := lostMember(ms); err != nil {
		return nil, nil, fmt.Errorf("bench: rebalance, while the slots were being taken: %w", err)
	}
	// The events kept for the other phases are not the members' memory.
	ev.mu.Lock()
	ev.all = nil
	ev.mu.Unlock()
	mem := idleMemory(cfg, n, heapBefore, rssBefore)
	if cfg.HeapProfile != "" {
		if err := writeHeapProfile(cfg.HeapProfile); err != nil {
			return nil, nil, err
		}
	}
	var out []Rebalance
	// measure applies a membership change (act updates ms) and waits until
	// every slot is held by its preferred owner in the new view.
	measure := func(change string, act func() error, ideal float64) error {
		before := leaders(ms)
		start := time.Now()
		if err := act(); err != nil {
			return err
		}
		check := settled(ms)
		if err := waitFor(5*time.Minute, func() bool { return check() || lostMember(ms) != nil }); err != nil {
			l := leaders(ms)
			return fmt.Errorf("%w (%s: %d of %d slots held, %d of them not by their preferred owner; %s)", err, change, len(l), n, misplaced(preferredOf(ms, cat), l), describeMisplaced(ms, cat))
		}
		if err := lostMember(ms); err != nil {
			return fmt.Errorf("bench: rebalance %s: %w", change, err)
		}
		took := time.Since(start)
		out = append(out, Rebalance{Change: change, Shape: shape, Slots: n, Moved: movedShare(before, leaders(ms), n), Ideal: ideal, Settle: took})
		return nil
	}
	if err := measure("3→4", func() error {
		m, err := startMember(cfg.Etcd, cat, handlers, ev.add)
		if err == nil {
			ms = append(ms, m)
		}
		return err
	}, 0.25); err != nil {
		return out, mem, err
	}
	return out, mem, measure("4→3", func() error {
		fourth := ms[3]
		ms = ms[:3]
		fourth.stop()
		return nil
	}, 0.25)
}

// smallJobs is n slots as jobs like j of 1 to 16 partitions each.
func smallJobs(j config.Job, n int) []config.Job {
	var out []config.Job
	for i := 0; n > 0; i++ {
		s := j
		s.Name, s.Partitions = fmt.Sprintf("small-%04d", i), min(n, 1+i*7%16)
		out = append(out, s)
		n -= s.Partitions
	}
	return out
}

// idleMemory is what n idle slots over three members cost the process, in
// live heap and resident memory, against what it used before the members
// started (heapBefore, rssBefore).
func idleMemory(cfg Config, n int, heapBefore, rssBefore int64) *Memory {
	heap := liveHeap() - heapBefore
	mem := &Memory{Slots: n, Members: 3, HeapBytes: heap, PerSlotPerMember: float64(heap) / float64(n) / 3, EtcdInProcess: cfg.EtcdInProcess}
	if rss := residentBytes(); rss > 0 && rssBefore > 0 {
		mem.RSSBytes = rss - rssBefore
		mem.RSSPer1000PerMember = float64(mem.RSSBytes) / (float64(n) / 1000) / 3
		debug.FreeOSMemory()
		mem.RSSKeptBytes = residentBytes() - rssBefore
		mem.RSSKeptPer1000PerMember = float64(mem.RSSKeptBytes) / (float64(n) / 1000) / 3
	}
	return mem
}

// cpuTime is this process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// residentBytes is the process's resident memory (VmRSS), or 0 where
// /proc/self/status cannot be read.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// liveHeap is the heap still in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
