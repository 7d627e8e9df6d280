package incarnation

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/scheduler"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// runMembers runs n members of the stored catalog of cluster until the
// test ends, and returns their current incarnations, by member.
func runMembers(t *testing.T, endpoints []string, cluster string, n int) func() []*Incarnation {
	t.Helper()
	var mu sync.Mutex
	current := make([]*Incarnation, n)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := Run(ctx, Config{Etcd: etcdclient.Config{Endpoints: endpoints}, Cluster: cluster, Name: fmt.Sprintf("m%d", i),
				Logger:    slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
				Scheduler: scheduler.Config{Handlers: jobs.Handlers{"tick": func(context.Context) error { return nil }}},
				OnIncarnation: func(inc *Incarnation) {
					mu.Lock()
					current[i] = inc
					mu.Unlock()
				}})
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		kiratest.Receive(t, done, 30*time.Second, "the members to leave")
	})
	return func() []*Incarnation {
		mu.Lock()
		defer mu.Unlock()
		return append([]*Incarnation(nil), current...)
	}
}

// keysOf counts the keys of cluster that name a job of prefix, and the
// cluster's keys but its journals and its history rings (the journals are
// a ring of each member's, the base job's ring fills as it runs).
func keysOf(t *testing.T, cli *clientv3.Client, cluster, prefix string) (named, rest int) {
	t.Helper()
	resp, err := cli.Get(context.Background(), keyspace.Cluster(cluster), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	history := keyspace.Cluster(cluster) + "history/"
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		switch {
		case strings.Contains(key, "/"+prefix):
			named++
		case strings.HasPrefix(key, keyspace.Journals(cluster)) || strings.HasPrefix(key, history):
		default:
			rest++
		}
	}
	return named, rest
}

// Jobs created, run (their slots' state and history written, manual runs
// waiting) and deleted, round after round, under two members: once the
// deletes are seen, etcd holds no key of them, and as many others as
// before the churn; no member runs or leads them.
func TestAChurnOfJobsLeavesEtcdFlat(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	cat, err := config.Parse("churn.yaml", []byte("cluster: churn\nmembership: {lease_ttl: 2s}\njobs:\n  - {name: base, schedule: '@every 1s', handler: tick}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.PutJobs(ctx, cli, cat, config.Source{By: config.ByApply, At: time.Now()}, 0); err != nil {
		t.Fatal(err)
	}
	members := runMembers(t, etcd.Endpoints(), "churn", 2)
	kiratest.WaitUntil(t, "both members ready", 20*time.Second, func() bool {
		for _, inc := range members() {
			if inc == nil || !inc.Ready(time.Now()) {
				return false
			}
		}
		return true
	})
	by := config.ManagerAPI("churn")
	body := []byte("schedule: '@every 1s'\nhandler: tick\npartitions: 2\n")
	round := func(r, n int) {
		t.Helper()
		var names []string
		for i := range n {
			name := fmt.Sprintf("churn-%d-%d", r, i)
			if _, err := config.PutJob(ctx, cli, "churn", body, name, config.PutJobOptions{Manager: by, CreateOnly: true}); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
		kiratest.WaitUntil(t, "every created job's slots to run", 20*time.Second, func() bool {
			for _, name := range names {
				resp, err := cli.Get(ctx, keyspace.JobStates("churn", name), clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil || resp.Count != 2 {
					return false
				}
			}
			return true
		})
		if _, err := ops.RequestRunAt(ctx, cli, "churn", []shard.Slot{{Job: names[0]}}, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if _, err := config.DeleteJob(ctx, cli, "churn", name, config.DeleteJobOptions{Manager: by}); err != nil {
				t.Fatal(err)
			}
		}
	}
	round(0, 1) // the first single-job write adds catalog-change, for good
	flat := func(what string, want int) {
		t.Helper()
		kiratest.WaitUntil(t, what, 30*time.Second, func() bool {
			named, rest := keysOf(t, cli, "churn", "churn-")
			return named == 0 && rest == want
		})
	}
	_, baseline := keysOf(t, cli, "churn", "churn-")
	flat("the warm-up job's keys swept", baseline)
	for r := 1; r <= 3; r++ {
		round(r, 8)
	}
	flat("etcd back to its baseline after the churn", baseline)
	for _, inc := range members() {
		for s := range inc.Scheduler().Leading() {
			if strings.HasPrefix(s.Job, "churn-") {
				t.Fatalf("member %s still leads %s", inc.ID(), s)
			}
		}
		for _, j := range inc.Scheduler().Jobs() {
			if strings.HasPrefix(j.Name, "churn-") {
				t.Fatalf("member %s still runs %s", inc.ID(), j.Name)
			}
		}
	}
}
