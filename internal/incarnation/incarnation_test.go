package incarnation

import (
	"context"
	"encoding/json"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/scheduler"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

const catalog = `cluster: life
membership:
  lease_ttl: 2s
jobs:
  - name: tick
    schedule: "@every 1s"
    partitions: 2
    handler: tick
`

// incarnations records every incarnation Run starts, and the runs of tick.
type incarnations struct {
	mu   sync.Mutex
	ids  []string
	runs int
}

func (r *incarnations) seen() ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...), r.runs
}

// startRun runs a member until the test ends; done is closed when Run has
// returned, with its error in *runErr.
func startRun(t *testing.T, endpoints []string) (rec *incarnations, cancel context.CancelFunc, done <-chan struct{}, runErr *error) {
	t.Helper()
	cat, err := config.Parse("life.yaml", []byte(catalog))
	if err != nil {
		t.Fatal(err)
	}
	rec = &incarnations{}
	tick := func(context.Context) error { rec.mu.Lock(); rec.runs++; rec.mu.Unlock(); return nil }
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	runErr = new(error)
	go func() {
		defer close(finished)
		*runErr = Run(ctx, Config{Etcd: etcdclient.Config{Endpoints: endpoints}, Catalog: cat, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
			Scheduler: scheduler.Config{Handlers: jobs.Handlers{"tick": tick}},
			OnIncarnation: func(inc *Incarnation) {
				if inc != nil {
					rec.mu.Lock()
					rec.ids = append(rec.ids, inc.ID())
					rec.mu.Unlock()
				}
			}})
	}()
	t.Cleanup(func() {
		cancel()
		kiratest.Receive(t, finished, 30*time.Second, "Run to return")
	})
	return rec, cancel, finished, runErr
}

func keys(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// Run stores the catalog, joins, runs the job, and on ctx's end leaves: its
// lease is revoked, so its record and every election key are gone at once.
func TestRunJoinsRunsAndLeaves(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	rec, cancel, done, runErr := startRun(t, etcd.Endpoints())
	kiratest.WaitUntil(t, "tick to run", 15*time.Second, func() bool { _, runs := rec.seen(); return runs >= 2 })
	if n := keys(t, cli, keyspace.Elections("life")); n != 2 {
		t.Fatalf("%d election keys while running, want 2 (one member, two slots)", n)
	}
	cancel()
	kiratest.Receive(t, done, 30*time.Second, "Run to return")
	if *runErr != nil {
		t.Fatalf("Run after ctx ended: %v, want nil", *runErr)
	}
	if m, e := keys(t, cli, keyspace.Members("life")), keys(t, cli, keyspace.Elections("life")); m != 0 || e != 0 {
		t.Fatalf("after leaving: %d member records, %d election keys; want none (lease revoked)", m, e)
	}
}

// A member whose lease is revoked behind its back stops everything and
// joins again as a new member, with a new id, and runs the job again.
func TestRunRejoinsAsANewMemberAfterALostLease(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	rec, _, done, runErr := startRun(t, etcd.Endpoints())
	kiratest.WaitUntil(t, "the first incarnation to run tick", 15*time.Second, func() bool { _, runs := rec.seen(); return runs >= 1 })
	leases, err := cli.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Leases {
		if _, err := cli.Revoke(context.Background(), l.ID); err != nil {
			t.Fatal(err)
		}
	}
	_, before := rec.seen()
	kiratest.WaitUntil(t, "a second incarnation running tick", 20*time.Second, func() bool {
		select {
		case <-done:
			t.Fatalf("Run returned instead of rejoining: %v", *runErr)
		default:
		}
		ids, runs := rec.seen()
		return len(ids) >= 2 && runs > before
	})
	ids, _ := rec.seen()
	if ids[0] == ids[1] {
		t.Fatalf("rejoined with the same id %s, want a new member", ids[0])
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

// A member whose --catalog file was not stored (kira apply stored another)
// runs the stored catalog and says so in its record, and again in the
// record of the member it rejoins as after a lost lease.
func TestFileNotStoredIsPublishedAfterARejoin(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	applied, err := config.Parse("applied.yaml", []byte(strings.Replace(catalog, "partitions: 2", "partitions: 1", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Put(ctx, cli, applied, config.Source{By: config.ByApply, At: time.Now()}, 0); err != nil {
		t.Fatal(err)
	}
	rec, _, _, _ := startRun(t, etcd.Endpoints())
	notice := func(id string) string {
		resp, err := cli.Get(ctx, keyspace.Member("life", id))
		if err != nil || len(resp.Kvs) == 0 {
			return ""
		}
		var r member.Record
		json.Unmarshal(resp.Kvs[0].Value, &r)
		return r.CatalogFileNotStored
	}
	kiratest.WaitUntil(t, "the first incarnation's record", 15*time.Second, func() bool { ids, _ := rec.seen(); return len(ids) == 1 && notice(ids[0]) != "" })
	if stored, _, _ := config.LoadStored(ctx, cli, "life"); stored.Jobs[0].Partitions != 1 {
		t.Fatalf("the file replaced kira apply's catalog")
	}
	leases, err := cli.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Leases {
		cli.Revoke(ctx, l.ID)
	}
	kiratest.WaitUntil(t, "the rejoined member's record to say its file was not stored", 20*time.Second, func() bool {
		ids, _ := rec.seen()
		return len(ids) >= 2 && strings.Contains(notice(ids[len(ids)-1]), "stored by kira apply")
	})
}

// Once offered to StoreFile, the --catalog file's catalog is dropped: the
// stored catalog runs, and a member of many jobs would otherwise keep every
// job twice for as long as it runs (forgetFile).
func TestTheFileCatalogIsNotKept(t *testing.T) {
	etcd := etcdtest.Start(t)
	joined := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	file := startForgetting(t, ctx, etcd.Endpoints(), func(inc *Incarnation) {
		if inc != nil {
			once.Do(func() { close(joined) })
		}
	}, finished)
	t.Cleanup(func() {
		cancel()
		kiratest.Receive(t, finished, 30*time.Second, "Run to return")
	})
	kiratest.Receive(t, joined, 15*time.Second, "the member to join")
	kiratest.WaitUntil(t, "the file's catalog to be collected", 10*time.Second, func() bool {
		runtime.GC()
		return file.Value() == nil
	})
}

// startForgetting runs a member on a --catalog file parsed here, and
// returns a weak pointer to that catalog: nothing of the test holds it.
func startForgetting(t *testing.T, ctx context.Context, endpoints []string, onInc func(*Incarnation), finished chan<- struct{}) weak.Pointer[config.Catalog] {
	cat, err := config.Parse("life.yaml", []byte(catalog))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Etcd: etcdclient.Config{Endpoints: endpoints}, Catalog: cat, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Scheduler:     scheduler.Config{Handlers: jobs.Handlers{"tick": func(context.Context) error { return nil }}},
		OnIncarnation: onInc}
	go func(cfg Config) {
		defer close(finished)
		if err := Run(ctx, cfg); err != nil {
			t.Errorf("Run: %v", err)
		}
	}(cfg)
	return weak.Make(cat)
}
