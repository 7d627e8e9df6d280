package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
)

// JobWritesConfig is the job-writes scenario (Config.JobWrites): Stored
// idle jobs in the catalog, then Clients writers creating jobs through
// the members' API (PUT /v1/jobs/{job}) until Creates are made, each
// created job firing every CreatedEvery; then the same writers delete them
// (DELETE /v1/jobs/{job}); then, if Churn is positive, creates and deletes
// at ChurnRate a second each for Churn, sampling the members' memory and
// etcd's database.
type JobWritesConfig struct {
	Stored, Clients, Creates int
	CreatedEvery             time.Duration
	Churn                    time.Duration
	ChurnRate                int
}

// JobWrites is what the scenario measured.
type JobWrites struct {
	Stored  int `json:"stored"`
	Clients int `json:"clients"`
	// Settle is from the members' start to every stored slot led.
	Settle  time.Duration `json:"settle_ns"`
	Creates WriteFigures  `json:"creates"`
	Deletes WriteFigures  `json:"deletes"`
	// FirstFires is the created jobs' first fires: how many ran by the
	// instant after their create's answer plus a second, and the lateness
	// of those (start − scheduled).
	FirstFires Figures `json:"first_fires"`
	// FirstStart is, for every created job that fired, from its create's
	// answer to its first fire's start: at most a period and the time the
	// members took to take the job in.
	FirstStart Spread `json:"first_start"`
	// FirstOverwritten counts created jobs whose first fire's record was
	// overwritten by later ones (a slot keeps its createdHistory newest):
	// they count in neither FirstFires nor FirstStart.
	FirstOverwritten int `json:"first_overwritten,omitempty"`
	// FiredAfterDelete counts fires of a deleted job scheduled more than a
	// second after its delete's answer.
	FiredAfterDelete int          `json:"fired_after_delete"`
	Churn            []SoakSample `json:"churn,omitempty"`
	MemberLost       string       `json:"member_lost,omitempty"`
}

// WriteFigures is one kind of write: how many, how fast, how long each.
type WriteFigures struct {
	Done      int           `json:"done"`
	Failed    int           `json:"failed"`
	FirstErr  string        `json:"first_error,omitempty"`
	PerSecond float64       `json:"per_second"`
	P50       time.Duration `json:"p50_ns"`
	P99       time.Duration `json:"p99_ns"`
	Max       time.Duration `json:"max_ns"`
}

// benchToken is the members' --http-token-file in the job-writes scenario.
const benchToken = "kira-bench-job-writes-token"

// procJobWrites runs the job-writes scenario against the production shape.
func procJobWrites(ctx context.Context, cfg Config, progress func(string)) (*JobWrites, error) {
	w := cfg.JobWrites
	res := &JobWrites{Stored: w.Stored, Clients: w.Clients}
	load, err := newLoadRun(cfg, "jobwrites", func(name, _ string) string {
		var b strings.Builder
		for i := range w.Stored {
			fmt.Fprintf(&b, "  - {name: stored-%06d, schedule: \"0 0 1 1 *\", handler: noop}\n", i)
		}
		return fmt.Sprintf(prodCatalog, name, b.String(), "")
	})
	if err != nil {
		return res, err
	}
	defer load.close()
	tokenFile := filepath.Join(load.dir, "token")
	if err := os.WriteFile(tokenFile, []byte(benchToken+"\n"), 0o600); err != nil {
		return res, err
	}
	cli, err := etcdclient.New(cfg.Etcd)
	if err != nil {
		return res, err
	}
	defer cli.Close()
	began := time.Now()
	procs, err := startRunProcs(cfg, cli, load, w.Stored, "--http-token-file", tokenFile)
	defer stopAll(procs)
	if err != nil {
		return res, fmt.Errorf("bench: job writes over %d stored jobs, while the slots were being taken: %w", w.Stored, err)
	}
	res.Settle = time.Since(began)
	var apis []string
	for _, p := range procs {
		apis = append(apis, strings.TrimSuffix(p.metrics, "/metrics"))
	}
	progress(fmt.Sprintf("job writes: %d creates by %d clients over %d stored jobs", w.Creates, w.Clients, w.Stored))
	created := runWrites(ctx, apis, w.Clients, w.Creates, "PUT", w.CreatedEvery, &res.Creates)
	time.Sleep(2*w.CreatedEvery + 2*time.Second) // every created job's first fire, and its record
	progress(fmt.Sprintf("job writes: deleting the %d jobs created", len(created)))
	deleted := runWrites(ctx, apis, w.Clients, len(created), "DELETE", 0, &res.Deletes)
	time.Sleep(w.CreatedEvery + 2*time.Second)
	if err := exited(procs); err != nil {
		res.MemberLost = err.Error()
	}
	if w.Churn > 0 {
		progress(fmt.Sprintf("job writes: churn of %d creates and deletes a second for %s", w.ChurnRate, w.Churn))
		res.Churn = churn(ctx, cfg, apis, procs)
	}
	stopAll(procs)
	return res, firstFires(cli, load.cluster, w.CreatedEvery, created, deleted, res)
}

// createdHistory is the created jobs' history_limit: a slot keeps its
// newest records only, and a created job fires every 10 s from its create
// to its delete, over a minute or two at 10,000 creates; firstFires reads
// each one's first fire, and counts those whose first record is gone
// (JobWrites.FirstOverwritten).
const createdHistory = 100

// written is when a job's write was answered.
type written map[string]time.Time

// runWrites makes n writes (method PUT: creates of jobs named w-<i>,
// firing every every; DELETE: deletes of them) from clients goroutines,
// spread over the members' APIs, and returns when each was answered.
func runWrites(ctx context.Context, apis []string, clients, n int, method string, every time.Duration, fig *WriteFigures) written {
	var (
		mu    sync.Mutex
		late  []time.Duration
		out   = written{}
		next  int
		wg    sync.WaitGroup
		hc    = writesClient(clients)
		start = time.Now()
	)
	defer hc.CloseIdleConnections()
	body := fmt.Sprintf("schedule: \"@every %s\"\nhandler: noop\nhistory_limit: %d\n", every, createdHistory)
	for c := range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				name := fmt.Sprintf("w-%06d", i)
				t0 := time.Now()
				err := writeJob(ctx, hc, apis[(c+i)%len(apis)], method, name, body)
				took := time.Since(t0)
				mu.Lock()
				if err != nil {
					fig.Failed++
					if fig.FirstErr == "" {
						fig.FirstErr = err.Error()
					}
				} else {
					late, out[name] = append(late, took), time.Now()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fig.Done = len(late)
	fig.PerSecond = float64(len(late)) / time.Since(start).Seconds()
	fig.P50, fig.P99, fig.Max = spread(late)
	return out
}

// writesClient is the HTTP client of clients writers at once: each keeps
// its connection to every API between writes, where http.DefaultTransport
// keeps two a host and opens the others anew for each write
// (TestJobWritesKeepTheirConnections).
func writesClient(clients int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = clients
	return &http.Client{Timeout: 30 * time.Second, Transport: t}
}

// writeJob sends one job write to the API at base.
func writeJob(ctx context.Context, hc *http.Client, base, method, name, body string) error {
	var r io.Reader
	if method == "PUT" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+"/v1/jobs/"+name, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+benchToken)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, name, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	return nil
}

// firstFires reads the created jobs' history: each one's first scheduled
// fire and its lateness (a job known a second after its create's answer
// fires at most one period every later), and any fire scheduled more than
// a second after its job's delete was answered.
func firstFires(cli *clientv3.Client, cluster string, every time.Duration, created, deleted written, res *JobWrites) error {
	isCreated := func(job string) bool { _, ok := created[job]; return ok }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prefix := strings.TrimSuffix(keyspace.History(cluster, "w-"), "/")
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	var ring []history.Slotted
	for _, kv := range resp.Kvs {
		if s, ok := keyspace.ParseHistoryEntry(cluster, string(kv.Key)); ok && isCreated(s.Job) {
			if stored, err := history.Decode(s, kv.Value); err == nil {
				ring = append(ring, history.Slotted{Slot: s, Stored: stored, Revision: kv.ModRevision})
			}
		}
	}
	inJournals, err := journal.NewCache(cli, cluster).Records(ctx, resp.Header.Revision, func(s shard.Slot) bool { return isCreated(s.Job) })
	if err != nil {
		return err
	}
	first := map[string]history.Record{}
	for _, r := range history.Gather(ring, inJournals) {
		if r.Cause != history.CauseSchedule || r.StartedAt.IsZero() {
			continue
		}
		if f, ok := first[r.Job]; !ok || r.ScheduledTime.Before(f.ScheduledTime) {
			first[r.Job] = r
		}
		if at, ok := deleted[r.Job]; ok && r.ScheduledTime.After(at.Add(time.Second)) {
			res.FiredAfterDelete++
		}
	}
	lost := overwritten(append(ring, inJournals...))
	var late, after []time.Duration
	for job, at := range created {
		if lost[job] {
			res.FirstOverwritten++
			continue
		}
		res.FirstFires.Expected++
		f, ok := first[job]
		if ok {
			after = append(after, f.StartedAt.Sub(at))
		}
		if !ok || f.ScheduledTime.After(at.Add(time.Second).Add(every)) {
			res.FirstFires.NotStarted++
			continue
		}
		late = append(late, f.StartedAt.Sub(f.ScheduledTime))
	}
	res.FirstFires.spread(late)
	res.FirstStart.P50, res.FirstStart.P99, res.FirstStart.Max = spread(after)
	return nil
}

// overwritten are the jobs of records none of whose records is its slot's
// first (a sequence number 0): a newer record took the first's place in
// the ring.
func overwritten(records []history.Slotted) map[string]bool {
	oldest := map[string]int64{}
	for _, r := range records {
		if seq := r.Stored.Seq; seq != nil {
			if o, ok := oldest[r.Slot.Job]; !ok || *seq < o {
				oldest[r.Slot.Job] = *seq
			}
		}
	}
	out := map[string]bool{}
	for job, o := range oldest {
		if o > 0 {
			out[job] = true
		}
	}
	return out
}

// Spread is a distribution's median, 99th percentile and maximum.
type Spread struct {
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// churn creates and deletes jobs at cfg.JobWrites.ChurnRate a second each
// (one writer, so at most what one writer's round trips allow) for
// cfg.JobWrites.Churn, keeping about ChurnRate×60 jobs alive, and samples
// etcd's database and the members' memory every SoakEvery.
func churn(ctx context.Context, cfg Config, apis []string, procs []*memberProc) []SoakSample {
	w := cfg.JobWrites
	var members []string
	for _, p := range procs {
		members = append(members, p.metrics)
	}
	hc := writesClient(1)
	defer hc.CloseIdleConnections()
	body := fmt.Sprintf("schedule: \"@every %s\"\nhandler: noop\nhistory_limit: 3\n", w.CreatedEvery)
	live := w.ChurnRate * 60
	tick := time.NewTicker(time.Second / time.Duration(w.ChurnRate))
	defer tick.Stop()
	began, lastSample := time.Now(), time.Time{}
	var samples []SoakSample
	for i := 0; time.Since(began) < w.Churn && ctx.Err() == nil; i++ {
		if time.Since(lastSample) >= cfg.SoakEvery {
			lastSample = time.Now()
			s := soakReading(cfg.Cluster, members).sample
			s.At = time.Since(began)
			samples = append(samples, s)
		}
		api := apis[i%len(apis)]
		writeJob(ctx, hc, api, "PUT", fmt.Sprintf("c-%07d", i), body)
		if i >= live {
			writeJob(ctx, hc, api, "DELETE", fmt.Sprintf("c-%07d", i-live), "")
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	return samples
}
