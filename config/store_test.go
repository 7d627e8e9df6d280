package config

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

// A stored catalog this version cannot read (a field it does not know, as a
// newer version would store; JSON written by hand) is refused loudly, at
// start and when it arrives through the watch, and the one running stays.
func TestUnreadableStoredCatalogIsRefused(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	cat, err := Parse("c.yaml", []byte("cluster: c\njobs:\n  - {name: a, schedule: \"@every 1s\", command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	storeSingle(t, cli, cat) // the watch of the single key, as the previous version stored it
	s, err := Read(ctx, cli, "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var applied, refused []int64
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchStored(wctx, cli, "c", s, func(u Update) { mu.Lock(); applied = append(applied, u.Revision); mu.Unlock() },
			func(r int64, err error) {
				if errors.Is(err, ErrUnreadableCatalog) {
					mu.Lock()
					refused = append(refused, r)
					mu.Unlock()
				}
			})
	}()
	defer func() { cancel(); kiratest.Receive(t, done, 10*time.Second, "WatchStored to return") }()
	for _, junk := range []string{
		`{"cluster":"c","jobs":[{"name":"a","schedule":"@every 1s","partitions":1,"quota":{"cpu":"2"}}]}`,
		`{not json`,
		`{"cluster":"c"}`,
	} {
		if _, err := cli.Put(ctx, keyspace.Catalog("c"), junk); err != nil {
			t.Fatal(err)
		}
	}
	kiratest.WaitUntil(t, "three versions refused", 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(refused) == 3 })
	mu.Lock()
	if len(applied) != 0 {
		t.Errorf("applied %v; want none", applied)
	}
	mu.Unlock()
	if _, _, err := LoadStored(ctx, cli, "c"); !errors.Is(err, ErrUnreadableCatalog) || !strings.Contains(err.Error(), "no cluster or no jobs") {
		t.Fatalf("LoadStored of junk: %v", err)
	}
	cli.Put(ctx, keyspace.Catalog("c"), `{"cluster":"c","jobs":[{"name":"a","quota":{}}]}`)
	if _, _, err := LoadStored(ctx, cli, "c"); err == nil || !strings.Contains(err.Error(), "does not know (stored by a newer version?)") {
		t.Fatalf("LoadStored of a newer version's catalog: %v", err)
	}
}

func mustParse(t *testing.T, text string) *Catalog {
	t.Helper()
	cat, err := Parse("c.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// Put stores only against the revision it is given; a stale one gets a
// conflict naming the stored revision and its source, and writes nothing.
func TestPutConflicts(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	a := mustParse(t, "cluster: c\njobs:\n  - {name: a, schedule: \"@every 1s\", command: [\"true\"]}\n")
	b := mustParse(t, "cluster: c\njobs:\n  - {name: b, schedule: \"@every 1s\", command: [\"true\"]}\n")
	rev, err := Put(ctx, cli, a, Source{By: ByApply}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conflict *ConflictError
	if _, err := Put(ctx, cli, b, Source{By: ByApply}, 0); !errors.As(err, &conflict) || conflict.Current.Revision != rev || conflict.Current.Catalog.Jobs[0].Name != "a" {
		t.Fatalf("second create: %v; want a conflict showing revision %d", err, rev)
	}
	if _, err := Put(ctx, cli, b, Source{By: ByApply}, rev-1); !errors.As(err, &conflict) || !strings.Contains(err.Error(), "source: kira apply") {
		t.Fatalf("stale revision: %v; want a conflict", err)
	}
	if s, _ := Read(ctx, cli, "c", 0); s.Revision != rev || s.Catalog.Jobs[0].Name != "a" {
		t.Fatalf("after conflicts: revision %d job %s; want %d a", s.Revision, s.Catalog.Jobs[0].Name, rev)
	}
	rev2, err := Put(ctx, cli, b, Source{By: ByApply}, rev)
	if err != nil || rev2 <= rev {
		t.Fatalf("put at the stored revision: %d, %v", rev2, err)
	}
	if _, err := Put(ctx, cli, a, Source{By: ByApply}, Force); err != nil {
		t.Fatalf("forced put: %v", err)
	}
}

// A member's --catalog file replaces only a file-stored catalog of a lower
// generation; every other case keeps the stored catalog and says why.
func TestFileVerdicts(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	file := func(job string, gen int) (*Catalog, Source) {
		text := "cluster: c\njobs:\n  - {name: " + job + ", schedule: \"@every 1s\", command: [\"true\"]}\n"
		if gen > 0 {
			text = "generation: " + strconv.Itoa(gen) + "\n" + text
		}
		cat := mustParse(t, text)
		return cat, FileSource("/etc/kira/"+job+".yaml", []byte(text), cat)
	}
	storeFile := func(job string, gen int) FileOutcome {
		t.Helper()
		cat, src := file(job, gen)
		out, err := StoreFile(ctx, cli, cat, src)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	stored := func() string {
		s, err := Read(ctx, cli, "c", 0)
		if err != nil {
			t.Fatal(err)
		}
		return s.Catalog.Jobs[0].Name
	}
	if out := storeFile("v1", 1); !out.Stored {
		t.Fatalf("nothing stored: %+v; want the file stored", out)
	}
	if out := storeFile("v1", 1); !out.Unchanged {
		t.Fatalf("same file again: %+v; want unchanged", out)
	}
	for _, c := range []struct {
		job  string
		gen  int
		want string
	}{
		{"v0", 0, "has no generation"},
		{"v1b", 1, "has the stored catalog's generation 1 but other content"},
	} {
		if out := storeFile(c.job, c.gen); out.Stored || !strings.Contains(out.Refused, c.want) || stored() != "v1" {
			t.Fatalf("file %s generation %d: %+v, stored %s; want refused (%s), v1 kept", c.job, c.gen, out, stored(), c.want)
		}
	}
	if out := storeFile("v2", 2); !out.Stored || stored() != "v2" {
		t.Fatalf("generation 2 over 1: %+v; want stored", out)
	}
	if out := storeFile("v1", 1); out.Stored || !strings.Contains(out.Refused, "older: generation 1, the stored catalog's is 2") || stored() != "v2" {
		t.Fatalf("generation 1 over 2: %+v; want refused", out)
	}
	if s, _ := Read(ctx, cli, "c", 0); s.Source == nil || s.Source.By != ByFile || s.Source.Generation != 2 || !strings.HasPrefix(s.Source.Digest, "sha256:") {
		t.Fatalf("source of the stored file: %+v", s.Source)
	}
	applied, _ := file("b", 0)
	if _, _, err := Store(ctx, cli, applied); err != nil {
		t.Fatal(err)
	}
	if out := storeFile("v3", 3); out.Stored || !strings.Contains(out.Refused, "stored by kira apply") || stored() != "b" {
		t.Fatalf("file over kira apply's catalog: %+v; want refused", out)
	}
}

// A catalog stored by an older version (no source key) reads as before,
// with no source; a --catalog file never replaces it.
func TestCatalogOfAnOlderVersion(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	if _, err := cli.Put(ctx, keyspace.Catalog("c"), `{"cluster":"c","membership":{"lease_ttl":6000000000},"jobs":[{"name":"old","schedule":"@every 1s","partitions":1,"command":["true"],"misfire":"fire-once","catchup_window":600000000000,"history_limit":10,"overlap":"skip","retries":{"max":0,"backoff":1000000000,"max_backoff":60000000000}}]}`); err != nil {
		t.Fatal(err)
	}
	s, err := Read(ctx, cli, "c", 0)
	if err != nil || s.Source != nil || s.Catalog.Jobs[0].Name != "old" {
		t.Fatalf("older version's catalog: %+v, %v", s, err)
	}
	if !strings.Contains(s.Source.String(), "older version") {
		t.Fatalf("nil source says %q", s.Source.String())
	}
	cat := mustParse(t, "generation: 5\ncluster: c\njobs:\n  - {name: new, schedule: \"@every 1s\", command: [\"true\"]}\n")
	out, err := StoreFile(ctx, cli, cat, FileSource("f.yaml", nil, cat))
	if err != nil || out.Stored || !strings.Contains(out.Refused, "older version") {
		t.Fatalf("file over an older version's catalog: %+v, %v; want refused", out, err)
	}
	// Its source is not taken from a source key the previous version's kira
	// apply left behind.
	storeSingle(t, cli, cat)
	cli.Put(ctx, keyspace.Catalog("c"), string(s.data))
	if s, _ := Read(ctx, cli, "c", 0); s.Source != nil {
		t.Fatalf("catalog rewritten by an older version has source %+v; want none", s.Source)
	}
}

// History reads the key's older revisions back, newest first, until
// etcd's compaction.
func TestHistoryReadsBack(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	var revs []int64
	for _, job := range []string{"a", "b", "c"} {
		rev, err := Put(ctx, cli, mustParse(t, "cluster: c\njobs:\n  - {name: "+job+", schedule: \"@every 1s\", command: [\"true\"]}\n"), Source{By: ByApply}, Force)
		if err != nil {
			t.Fatal(err)
		}
		cli.Put(ctx, "/unrelated", job) // revisions between the catalog's
		revs = append(revs, rev)
	}
	h, compacted, err := History(ctx, cli, "c", 10)
	if err != nil || compacted || len(h) != 3 || h[0].Catalog.Jobs[0].Name != "c" || h[2].Catalog.Jobs[0].Name != "a" || h[2].Revision != revs[0] || h[1].Source.By != ByApply {
		t.Fatalf("history: %d entries, compacted %v, %v", len(h), compacted, err)
	}
	if h, _, _ := History(ctx, cli, "c", 2); len(h) != 2 {
		t.Fatalf("history of 2: %d entries", len(h))
	}
	if _, err := cli.Compact(ctx, revs[1]); err != nil {
		t.Fatal(err)
	}
	h, compacted, err = History(ctx, cli, "c", 10)
	if err != nil || !compacted || len(h) != 2 || h[1].Revision != revs[1] {
		t.Fatalf("history after compaction: %d entries, compacted %v, %v; want 2 and compacted", len(h), compacted, err)
	}
}

// Members starting at once with files of generations 1 and 2 store the
// catalog at most once each and end at generation 2: read back, the stored
// versions never go from 2 to 1.
func TestConcurrentFilesConverge(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		gen := 1 + i%2
		// 200 jobs: each store is staged, so others read while it writes.
		text := "generation: " + strconv.Itoa(gen) + "\ncluster: c\njobs:\n  - {name: v" + strconv.Itoa(gen) + ", schedule: \"@every 1s\", command: [\"true\"]}\n" +
			strings.TrimPrefix(string(manyJobs(199)), "cluster: c\njobs:\n")
		cat := mustParse(t, text)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := StoreFile(ctx, cli, cat, FileSource("f.yaml", []byte(text), cat))
			errs <- err
		}()
	}
	go func() { wg.Wait(); close(done) }()
	kiratest.Receive(t, done, 20*time.Second, "every StoreFile to return")
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	h, _, err := History(ctx, cli, "c", 10)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := len(h) - 1; i >= 0; i-- {
		names = append(names, h[i].Catalog.Jobs[0].Name)
	}
	if got := strings.Join(names, ","); got != "v2" && got != "v1,v2" {
		t.Fatalf("stored versions, oldest first: %s; want v2 or v1,v2", got)
	}
}
