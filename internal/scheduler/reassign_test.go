package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Three members whose assignments came by different histories: two
// followed jobs written one by one and placed each alone, the third read
// the catalog whole (as after its watch was compacted) and assigned it
// whole. Every job then written one by one through config.JobWriter is
// wanted by exactly one of them at once: one leads each of its slots and
// nobody else stands in its election. The clock never reaches the whole
// assignment the placements ask for, so nothing but the placement decides.
func TestAJobAddedIsWantedByOneMember(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	var file strings.Builder
	file.WriteString("cluster: oneeach\njobs:\n")
	for i := range 60 {
		fmt.Fprintf(&file, "  - {name: stored-%02d, schedule: '@hourly', handler: noop, partitions: %d}\n", i, 1+i%4)
	}
	cat, err := config.Parse("oneeach.yaml", []byte(file.String()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.PutJobs(ctx, cli, cat, config.Source{By: config.ByApply, At: time.Now().UTC()}, 0); err != nil {
		t.Fatal(err)
	}
	stored := readStored(t, cli, 0)
	clk := clock.NewManual(t0)
	rec := newRecorder()
	var nodes []*node
	for range 3 {
		nodes = append(nodes, startNode(t, cli, stored.Catalog, rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clk, cfg: Config{CatalogRevision: stored.Revision}}))
	}
	waitUntil(t, "the stored jobs led, each by its owner", 30*time.Second, func() bool {
		return leadersMatch(ringOwners(t, stored.Catalog, nodes...), nodes...)
	})
	followFrom(t, cli, stored.Revision, nodes[0], nodes[1])
	w := config.NewJobWriter(cli, "oneeach")
	write := func(prefix string, n int) (names []string, rev int64) {
		for i := range n {
			name := fmt.Sprintf("%s-%02d", prefix, i)
			body := fmt.Sprintf("schedule: '@hourly'\nhandler: noop\npartitions: %d\n", 1+i%5)
			res, err := w.PutJob(ctx, []byte(body), name, config.PutJobOptions{Manager: config.ManagerAPI("test")})
			if err != nil {
				t.Fatal(err)
			}
			names, rev = append(names, name), res.Revision
		}
		return names, rev
	}
	_, rev := write("placed", 30)
	appliedBy(t, rec, rev, nodes[0], nodes[1])
	whole := readStored(t, cli, rev)
	if err := nodes[2].sched.SetCatalog(whole.Catalog, whole.Revision); err != nil {
		t.Fatal(err)
	}
	appliedBy(t, rec, rev, nodes[2])
	followFrom(t, cli, whole.Revision, nodes[2])

	added, rev := write("added", 30)
	appliedBy(t, rec, rev, nodes...)
	var slots []shard.Slot
	for i, name := range added {
		for p := range 1 + i%5 {
			slots = append(slots, shard.Slot{Job: name, Partition: p})
		}
	}
	if !kiratest.Poll(15*time.Second, func() bool { return len(wantedOtherwise(t, cli, slots, nodes)) == 0 }) {
		otherwise := wantedOtherwise(t, cli, slots, nodes)
		t.Fatalf("%d of the %d slots of the jobs added are not wanted by exactly one member (how many stand for each): %v", len(otherwise), len(slots), otherwise)
	}
}

// readStored is the catalog stored at rev (0: the latest).
func readStored(t *testing.T, cli *clientv3.Client, rev int64) *config.Stored {
	t.Helper()
	s, err := config.Read(context.Background(), cli, "oneeach", rev)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// followFrom has each of nodes follow the catalog stored after revision from,
// as a member's incarnation does, until the test ends.
func followFrom(t *testing.T, cli *clientv3.Client, from int64, nodes ...*node) {
	for _, n := range nodes {
		from := readStored(t, cli, from) // a watch's own: it follows from its state
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			config.WatchStored(ctx, cli, from.Catalog.Cluster, from, func(u config.Update) {
				if err := n.sched.SetCatalogUpdate(u); err != nil {
					t.Errorf("revision %d refused: %v", u.Revision, err)
				}
			}, func(rev int64, err error) { t.Errorf("revision %d unreadable: %v", rev, err) })
		}()
		t.Cleanup(func() { cancel(); kiratest.Receive(t, done, 10*time.Second, "the catalog watch to return") })
	}
}

// appliedBy waits until each of nodes runs the catalog of rev.
func appliedBy(t *testing.T, rec *recorder, rev int64, nodes ...*node) {
	t.Helper()
	for _, n := range nodes {
		waitKind(t, rec, fmt.Sprintf("catalog %d applied by %s", rev, n.id), 1, func(e Event) bool {
			return e.Kind == CatalogApplied && e.Member == n.id && e.Count == int(rev)
		})
	}
}

// standing is how many members want slot s: 1 when one of nodes leads it
// and no other key stands in its election; 0 when nobody leads it.
func standing(t *testing.T, cli *clientv3.Client, s shard.Slot, nodes []*node) int {
	leaders := 0
	for _, n := range nodes {
		if _, ok := n.sched.Leading()[s]; ok {
			leaders++
		}
	}
	if leaders == 0 {
		return 0
	}
	resp, err := cli.Get(context.Background(), keyspace.Election("oneeach", s)+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return max(leaders, int(resp.Count))
}

// wantedOtherwise is the slots not wanted by exactly one member, with how
// many stand for each.
func wantedOtherwise(t *testing.T, cli *clientv3.Client, slots []shard.Slot, nodes []*node) map[shard.Slot]int {
	out := map[shard.Slot]int{}
	for _, s := range slots {
		if n := standing(t, cli, s, nodes); n != 1 {
			out[s] = n
		}
	}
	return out
}

// While the whole assignment that a job added one by one asks for
// computes (held at its start), the loop fires on time; once it is let go,
// it is installed.
func TestTheLoopFiresWhileTheWholeAssignmentComputes(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	clk := clock.NewManual(t0)
	tick := withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop"})
	added := withDefaults(config.Job{Name: "added", Schedule: "@hourly", Handler: "noop"})
	entered, release := make(chan struct{}, 1), make(chan struct{})
	hook := func() {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
	}
	rec := newRecorder()
	n := startNode(t, cli, catalog("offloop", tick), rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clk, cfg: Config{CatalogRevision: 10}, assign: hook})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the node stops, which waits for the computation
	waitKind(t, rec, "tick raised", 1, isJob(Raised, "tick"))
	if err := n.sched.SetCatalogUpdate(namedUpdate(catalog("offloop", tick, added), 11, 10, nil, []string{"added"}, nil)); err != nil {
		t.Fatal(err)
	}
	appliedBy(t, rec, 11, n)
	clk.Advance(reassignQuiet) // the whole assignment is due
	kiratest.Receive(t, entered, 15*time.Second, "the whole assignment to start computing")
	clk.Advance(9 * time.Second) // 12:00:10.5
	waitKind(t, rec, "tick's 12:00:10 while the whole assignment computes", 1, isJob(Started, "tick"))
	free()
	waitUntil(t, "the added job led", 15*time.Second, func() bool {
		_, ok := n.sched.Leading()[shard.Slot{Job: "added"}]
		return ok
	})
}

// A whole assignment asked for before a job was placed, or before a view
// was applied, is dropped when it comes: installed, it would leave the
// job's slot wanted by nobody, or keep the slots of the older view. The
// next, asked for after, is installed. The test plays the loop; every
// campaign waits in line, so nothing talks to etcd.
func TestAStaleWholeAssignmentIsDropped(t *testing.T) {
	cur := map[string]config.Job{}
	for i := range 6 {
		cur[fmt.Sprintf("job-%d", i)] = config.Job{Name: fmt.Sprintf("job-%d", i), Schedule: "@hourly", Handler: "noop", Partitions: 1 + i%3}
	}
	s, _ := unrunScheduler(t, catalogOf(cur))
	for range maxCampaigning {
		s.campaigning <- struct{}{}
	}
	me := s.member.ID()
	alone := member.View{Revision: 1, Members: []string{me}}
	s.applyView(alone)
	rev := int64(1)
	if err := s.SetCatalog(catalogOf(cur), rev); err != nil {
		t.Fatal(err)
	}
	s.catalogUpdated(alone)
	add := func(name string, v member.View) {
		t.Helper()
		cur[name] = config.Job{Name: name, Schedule: "@hourly", Handler: "noop", Partitions: 2}
		if err := s.SetCatalogUpdate(namedUpdate(catalogOf(cur), rev+1, rev, nil, []string{name}, nil)); err != nil {
			t.Fatal(err)
		}
		rev++
		s.catalogUpdated(v)
	}
	ask := func() {
		t.Helper()
		s.reassignIfDue(s.reassign.due)
		if !s.reassign.computing {
			t.Fatal("no whole assignment computing after a job was placed")
		}
	}
	take := func() wholeAssignment {
		w := kiratest.Receive(t, s.wholes, 10*time.Second, "the whole assignment")
		s.reassigned(w)
		return w
	}

	add("x", alone)
	ask()
	add("y", alone) // placed while it computes
	if w := take(); s.assigned.out == w.out {
		t.Fatal("a whole assignment asked for before y was placed was installed")
	}
	if err := runsExactly(s, cur, false, alone); err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		if sl := s.slots[shard.Slot{Job: "y", Partition: p}]; sl == nil || !sl.wanted {
			t.Fatalf("y/%d is not wanted by the only member", p)
		}
	}
	ask()
	if w := take(); s.assigned.out != w.out {
		t.Fatal("the whole assignment asked for after y was placed was not installed")
	}
	if err := runsExactly(s, cur, true, alone); err != nil {
		t.Fatal(err)
	}

	two := member.View{Revision: 2, Members: slices.Sorted(slices.Values([]string{me, "m-other"}))}
	add("z", alone)
	ask()
	s.applyView(two) // while it computes, over the view of one
	if w := take(); s.assigned.out == w.out {
		t.Fatal("a whole assignment over the view before was installed")
	}
	if err := runsExactly(s, cur, true, two); err != nil {
		t.Fatal(err)
	}
}
