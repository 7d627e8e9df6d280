package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdclient"
)

// soakCatalog is the soak's load: an HTTP job every second over n slots,
// answered by the bench, with the defaults a user gets (history limit,
// misfire and overlap policies).
const soakCatalog = `cluster: %s
jobs:
  - name: load
    schedule: "@every 1s"
    partitions: %d
    http: {url: "%s", method: GET}
`

// Soak is the production shape under a steady load for a long while,
// sampled at an interval: what must stay flat (etcd's database, the
// members' memory and goroutines) and what must not happen (skips,
// failures).
type Soak struct {
	Slots    int           `json:"slots"`
	Executor string        `json:"executor"`
	Duration time.Duration `json:"duration_ns"` // as run: shorter if the soak was interrupted
	Every    time.Duration `json:"every_ns"`
	// QuotaBytes is etcd's backend quota (--quota-backend-bytes), the
	// largest member's.
	QuotaBytes float64      `json:"quota_bytes"`
	Samples    []SoakSample `json:"samples"`
	Summary    SoakSummary  `json:"summary"`
	// MemberLost, if set, says which member exited during the soak, which
	// ended it.
	MemberLost string `json:"member_lost,omitempty"`
}

// SoakSample is one sampling of a soak.
type SoakSample struct {
	At time.Duration `json:"at_ns"` // since the soak began, a warmup after every slot was owned
	// DBBytes is the size of the database file, DBInUseBytes the part of
	// it in use, each the largest etcd member's.
	DBBytes      float64   `json:"db_bytes"`
	DBInUseBytes float64   `json:"db_in_use_bytes"`
	RSSBytes     []float64 `json:"rss_bytes"`  // each member's resident memory
	Goroutines   []float64 `json:"goroutines"` // each member's
	// Executions (ended), Skipped (fires not started) and Failed
	// (executions) are the members' counters summed, since the soak began.
	Executions float64 `json:"executions"`
	Skipped    float64 `json:"skipped"`
	Failed     float64 `json:"failed"`
}

// procSoak runs the soak: cfg.SoakSlots slots firing every second on three
// `kira run` processes against cfg.Cluster, from cfg.Warmup after every
// slot is owned for cfg.Soak, sampled every cfg.SoakEvery, until then or
// until ctx ends.
func procSoak(ctx context.Context, cfg Config, progress func(string)) (*Soak, error) {
	n := cfg.SoakSlots
	res := &Soak{Slots: n, Executor: fmt.Sprintf("http, %d-byte answer", cfg.OutputBytes), Every: cfg.SoakEvery}
	defer func() { res.Summary = summarize(res.Samples) }()
	load, err := newLoadRun(cfg, "soak", func(name, url string) string { return fmt.Sprintf(soakCatalog, name, n, url) })
	if err != nil {
		return res, err
	}
	defer load.close()
	cli, err := etcdclient.New(cfg.Etcd)
	if err != nil {
		return res, err
	}
	defer cli.Close()
	procs, err := startRunProcs(cfg, cli, load, n)
	defer stopAll(procs)
	if err != nil {
		return res, fmt.Errorf("bench: soak at %d slots, while the slots were being taken: %w", n, err)
	}
	var metrics []string
	for _, p := range procs {
		metrics = append(metrics, p.metrics)
	}
	select {
	case <-ctx.Done():
		return res, nil
	case <-time.After(cfg.Warmup):
	}
	began := time.Now()
	base := soakReading(cfg.Cluster, metrics)
	res.QuotaBytes = base.quota
	tick := time.NewTicker(cfg.SoakEvery)
	defer tick.Stop()
	for lastProgress := began; ; {
		r := soakReading(cfg.Cluster, metrics)
		s := r.sample.since(base.sample)
		s.At = time.Since(began)
		res.Samples = append(res.Samples, s)
		res.Duration = s.At
		if time.Since(lastProgress) >= time.Minute {
			lastProgress = time.Now()
			progress(fmt.Sprintf("soak %s of %s: database %.1f MB (%.1f MB in use), %.0f executions, %.0f skipped, %.0f failed",
				s.At.Round(time.Second), cfg.Soak, s.DBBytes/1e6, s.DBInUseBytes/1e6, s.Executions, s.Skipped, s.Failed))
		}
		if err := exited(procs); err != nil {
			res.MemberLost = err.Error()
			return res, nil
		}
		if s.At >= cfg.Soak {
			return res, nil
		}
		select {
		case <-ctx.Done():
			return res, nil
		case <-tick.C:
		}
	}
}

// soakRead is a soak's readings at one moment: the sample, with the
// members' counters since they started, and etcd's quota.
type soakRead struct {
	sample SoakSample
	quota  float64
}

// soakReading reads etcd's database sizes and quota from the cluster's
// /metrics, and the members' memory, goroutines and counters from theirs.
func soakReading(c *EtcdCluster, members []string) soakRead {
	var r soakRead
	for _, url := range c.metrics {
		m := scrape(url)
		r.sample.DBBytes = max(r.sample.DBBytes, m["etcd_mvcc_db_total_size_in_bytes"])
		r.sample.DBInUseBytes = max(r.sample.DBInUseBytes, m["etcd_mvcc_db_total_size_in_use_in_bytes"])
		r.quota = max(r.quota, m["etcd_server_quota_backend_bytes"])
	}
	for _, url := range members {
		m := scrape(url)
		r.sample.RSSBytes = append(r.sample.RSSBytes, m["process_resident_memory_bytes"])
		r.sample.Goroutines = append(r.sample.Goroutines, m["go_goroutines"])
		r.sample.Executions += m["kira_executions_total"]
		r.sample.Skipped += m["kira_fires_skipped_total"]
		r.sample.Failed += sumWith(m, "kira_executions_total", `outcome="failed"`)
	}
	return r
}

// since is sample s with its counters counted from those of base.
func (s SoakSample) since(base SoakSample) SoakSample {
	s.Executions -= base.Executions
	s.Skipped -= base.Skipped
	s.Failed -= base.Failed
	return s
}

// SoakSummary is what a soak's samples say in a few figures.
type SoakSummary struct {
	// DBMax is the largest database file size sampled, DBMaxAt when it was
	// first reached; DBLastQuarterMin is the smallest in the last quarter
	// of the soak: a plateau has it near DBMax.
	DBMax            float64       `json:"db_max_bytes"`
	DBMaxAt          time.Duration `json:"db_max_at_ns"`
	DBLastQuarterMin float64       `json:"db_last_quarter_min_bytes"`
	// RSSFirstQuarter and RSSLastQuarter are the members' mean resident
	// memory over the first and the last quarter of the samples.
	RSSFirstQuarter float64 `json:"rss_first_quarter_bytes"`
	RSSLastQuarter  float64 `json:"rss_last_quarter_bytes"`
	// GoroutinesMin and GoroutinesMax bound every member's goroutines.
	GoroutinesMin float64 `json:"goroutines_min"`
	GoroutinesMax float64 `json:"goroutines_max"`
	// Executions, Skipped and Failed are the soak's totals.
	Executions float64 `json:"executions"`
	Skipped    float64 `json:"skipped"`
	Failed     float64 `json:"failed"`
}

// summarize sums up a soak's samples; the zero summary if there are none.
func summarize(samples []SoakSample) SoakSummary {
	var sum SoakSummary
	n := len(samples)
	if n == 0 {
		return sum
	}
	quarter := max(1, n/4)
	sum.DBLastQuarterMin = samples[n-quarter].DBBytes
	sum.GoroutinesMin = samples[0].Goroutines[0]
	for i, x := range samples {
		if x.DBBytes > sum.DBMax {
			sum.DBMax, sum.DBMaxAt = x.DBBytes, x.At
		}
		if i >= n-quarter {
			sum.DBLastQuarterMin = min(sum.DBLastQuarterMin, x.DBBytes)
		}
		for _, g := range x.Goroutines {
			sum.GoroutinesMin, sum.GoroutinesMax = min(sum.GoroutinesMin, g), max(sum.GoroutinesMax, g)
		}
	}
	sum.RSSFirstQuarter, sum.RSSLastQuarter = meanRSS(samples[:quarter]), meanRSS(samples[n-quarter:])
	last := samples[n-1]
	sum.Executions, sum.Skipped, sum.Failed = last.Executions, last.Skipped, last.Failed
	return sum
}

// meanRSS is the members' mean resident memory over samples.
func meanRSS(samples []SoakSample) float64 {
	total, count := 0.0, 0
	for _, x := range samples {
		for _, r := range x.RSSBytes {
			total, count = total+r, count+1
		}
	}
	if count == 0 {
		return 0
	}
	return total / float64(count)
}
