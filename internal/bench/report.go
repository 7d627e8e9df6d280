package bench

import (
	"slices"
	"time"
)

// Report is what kira bench prints.
type Report struct {
	// Etcd says which etcd the figures come from: the bench's own (and its
	// tuning), or the endpoints given.
	Etcd      string      `json:"etcd"`
	Failover  []Failover  `json:"failover,omitempty"`
	Handover  *Handover   `json:"handover,omitempty"`
	Lateness  []Lateness  `json:"lateness,omitempty"`
	Rebalance []Rebalance `json:"rebalance,omitempty"`
	Memory    *Memory     `json:"memory,omitempty"`
	Soak      *Soak       `json:"soak,omitempty"`
	JobWrites *JobWrites  `json:"job_writes,omitempty"`
}

// Failover is kill → first execution by the new owner, per TTL.
type Failover struct {
	TTL      time.Duration   `json:"ttl_ns"`
	Samples  []time.Duration `json:"samples_ns"`
	Median   time.Duration   `json:"median_ns"`
	Worst    time.Duration   `json:"worst_ns"`
	RatioTTL float64         `json:"median_over_ttl"`
	Lost     int             `json:"fires_lost"`
}

// Handover is graceful stop → next owner holds the slot.
type Handover struct {
	Samples []time.Duration `json:"samples_ns"`
	Median  time.Duration   `json:"median_ns"`
	Worst   time.Duration   `json:"worst_ns"`
	Lost    int             `json:"fires_lost"`
}

// Lateness is actual start − scheduled time at a number of slots.
type Lateness struct {
	Slots    int           `json:"slots"`
	Executor string        `json:"executor"`
	Jitter   time.Duration `json:"jitter_ns,omitempty"` // Config.Jitter
	Every    time.Duration `json:"every_ns,omitempty"`  // Config.Every
	Jobs     bool          `json:"jobs,omitempty"`      // Config.Jobs
	Overlap  string        `json:"overlap"`             // the load's overlap policy
	Settle   time.Duration `json:"settle_ns"`           // start of 3 members → every slot owned
	// Drain is how long, after the window and 2 s more, the members' writers
	// took to commit what they had queued by then (production shape, at
	// most 10 s): the window's last records were still queued.
	Drain time.Duration `json:"drain_ns,omitempty"`
	Figures
	EtcdCalls  map[string]int `json:"etcd_calls"`                // gRPC calls by method during the window
	PerExecute float64        `json:"etcd_writes_per_execution"` // write calls (Txn, Put, DeleteRange)
	// KeysPerExecute is the keys etcd wrote (put or deleted) during the
	// window per execution, from its own counters; zero when etcd is not in
	// this process.
	KeysPerExecute float64 `json:"etcd_keys_written_per_execution"`
	// BytesPerExecute is the bytes etcd received from its clients (gRPC
	// requests: the writes and the reads) during the window per execution,
	// from its own counters; zero when etcd is not in this process.
	BytesPerExecute float64 `json:"etcd_bytes_received_per_execution"`
	// CPU is the three members' CPU time (user + system) during the window;
	// CPUPer1000 is that per second of window, per 1,000 slots, per member:
	// cores busy. EtcdInProcess: etcd ran in the bench's process.
	CPU           time.Duration `json:"cpu_ns"`
	CPUPer1000    float64       `json:"cpu_seconds_per_second_per_1000_slots_per_member"`
	EtcdInProcess bool          `json:"etcd_in_process"`
	// NoScheduler marks the floor row: the same commands forked at each
	// second without Kira or etcd (etcd, settle and CPU do not apply).
	NoScheduler bool `json:"no_scheduler,omitempty"`
	// MemberLost says which member stopped scheduling during the warm-up or
	// the window (its lease lost or untrusted), if one did: its slots were
	// then unowned for the rest of the run.
	MemberLost string `json:"member_lost,omitempty"`
	// ByInstant splits the window by the instant the load's fires were
	// scheduled at, every second unless Every says (JSON only): a run
	// still working off its start shows as late early seconds.
	ByInstant []InstantLateness `json:"by_instant,omitempty"`
	// Probe is the lateness of the one `sh -c :` slot (Config.Probe),
	// measured to its process start; not counted in the figures above.
	Probe *Figures `json:"sh_probe,omitempty"`
	// EtcdCost is what etcd paid (see Config.readEtcd), Cores how the
	// machine's CPUs were shared.
	EtcdCost *EtcdCost `json:"etcd_cost,omitempty"`
	Cores    *Cores    `json:"cores,omitempty"`
}

// instantTally is what started and was skipped of the fires scheduled at
// one instant of the window.
type instantTally struct {
	late    []time.Duration
	skipped int
}

// tallied is the window's instants, every every from from, as
// Lateness.ByInstant.
func tallied(from time.Time, every time.Duration, instants []instantTally) []InstantLateness {
	out := make([]InstantLateness, 0, len(instants))
	for i, in := range instants {
		s := InstantLateness{At: from.Add(time.Duration(i) * every), Started: len(in.late), Skipped: in.skipped}
		s.P50, s.P99, s.Max = spread(in.late)
		out = append(out, s)
	}
	return out
}

// Figures count a set of fires over the window and spread their lateness.
type Figures struct {
	Expected int `json:"expected"`
	Started  int `json:"started"`
	Skipped  int `json:"skipped"`
	// NotStarted counts fires handed to an execution that ended without
	// starting (its start could not be recorded, or the slot was lost).
	NotStarted int           `json:"not_started"`
	P50        time.Duration `json:"p50_ns"`
	P99        time.Duration `json:"p99_ns"`
	Max        time.Duration `json:"max_ns"`
}

// spread sets Started and the spread of the lateness of the fires that started.
func (g *Figures) spread(late []time.Duration) {
	g.Started = len(late)
	g.P50, g.P99, g.Max = spread(late)
}

// InstantLateness is the lateness of the fires scheduled at one instant.
type InstantLateness struct {
	At      time.Time     `json:"at"`
	Started int           `json:"started"`
	Skipped int           `json:"skipped"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	Max     time.Duration `json:"max_ns"`
}

// Memory is what idle slots cost the members, measured in the rebalance
// phase (one job) from the `kira run` processes' own /metrics: with 3
// members holding Slots idle slots, each member's live heap (Go's
// go_gc_heap_live_bytes, as of its last collection) and resident memory
// (process_resident_memory_bytes), minus those of a member holding one
// slot (the base).
type Memory struct {
	Slots            int     `json:"slots"`
	Members          int     `json:"members"`
	HeapBytes        int64   `json:"heap_bytes"`
	PerSlotPerMember float64 `json:"heap_bytes_per_slot_per_member"`
	// BaseHeapBytes and BaseRSSBytes are the base member's.
	BaseHeapBytes       int64   `json:"base_heap_bytes"`
	BaseRSSBytes        int64   `json:"base_rss_bytes"`
	RSSBytes            int64   `json:"rss_bytes"`
	RSSPer1000PerMember float64 `json:"rss_bytes_per_1000_slots_per_member"`
}

// Rebalance is a membership change at many slots.
type Rebalance struct {
	Change string `json:"change"`
	// Shape is the catalog: one job of all the slots, or many small jobs.
	Shape  string        `json:"shape"`
	Slots  int           `json:"slots"`
	Moved  float64       `json:"moved_fraction"`
	Ideal  float64       `json:"ideal_fraction"`
	Settle time.Duration `json:"settle_ns"`
}

// spread sorts late and returns its p50, p99 and maximum (zeros when empty).
func spread(late []time.Duration) (p50, p99, maxLate time.Duration) {
	slices.Sort(late)
	if len(late) > 0 {
		maxLate = late[len(late)-1]
	}
	return percentile(late, 0.5), percentile(late, 0.99), maxLate
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return percentile(s, 0.5)
}
