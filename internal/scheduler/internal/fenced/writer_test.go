package fenced

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/kiratest"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

// heldClaim creates key and returns the claim of its holder.
func heldClaim(t *testing.T, cli *clientv3.Client, key string) fencing.Claim {
	t.Helper()
	resp, err := cli.Put(context.Background(), key, "me")
	if err != nil {
		t.Fatal(err)
	}
	return fencing.Claim{LeaderKey: key, Token: fencing.Token(resp.Header.Revision)}
}

// One batch may hold two writes of one key (etcd refuses that in one
// transaction) and writes whose claim no longer holds: every write still
// gets the right answer, and the others are committed.
func TestWriterBatchesRepeatedKeysAndLostClaims(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	good := heldClaim(t, cli, "/leader/held")
	other := heldClaim(t, cli, "/leader/other")
	lost := fencing.Claim{LeaderKey: "/leader/gone", Token: good.Token} // no such key: fenced
	w := NewWriter(cli)
	put := func(c fencing.Claim, k, v string) Write {
		return Write{Claim: c, Ops: []clientv3.Op{clientv3.OpPut(k, v)}, Done: make(chan error, 1)}
	}
	writes := []Write{
		put(good, "/s/a", "1"),
		put(lost, "/s/b", "1"),
		put(other, "/s/c", "1"),
		put(good, "/s/a", "2"), // the same key again: waits for the next batch
	}
	for _, fw := range writes {
		w.Enqueue(fw)
	}
	first, keys := w.next()
	if len(first) != 3 {
		t.Fatalf("first batch has %d writes; want 3 (the repeated key waits for the next)", len(first))
	}
	w.commit(ctx, first, nil)
	w.land(nil, keys)
	if second, keys := w.next(); len(second) != 1 {
		t.Fatalf("second batch has %d writes; want 1", len(second))
	} else {
		w.commit(ctx, second, nil)
		w.land(nil, keys)
	}
	for i, want := range []error{nil, fencing.ErrFenced, nil, nil} {
		if err := <-writes[i].Done; !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Fatalf("write %d: %v; want %v", i, err, want)
		}
	}
	for k, want := range map[string]string{"/s/a": "2", "/s/c": "1"} {
		resp, _ := cli.Get(ctx, k)
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want {
			t.Fatalf("%s = %v; want %s", k, resp.Kvs, want)
		}
	}
	if resp, _ := cli.Get(ctx, "/s/b"); len(resp.Kvs) != 0 {
		t.Fatal("a write under a lost claim was committed")
	}
}

// Two writes of one slot (one claim) never share a transaction, even when
// they write different keys: each commits at a revision of its own, which
// tells a record's state from the state key's (stateFrom).
func TestWriterNeverBatchesTwoWritesOfOneSlot(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	slot := heldClaim(t, cli, "/leader/slot")
	w := NewWriter(cli)
	writes := []Write{
		{Claim: slot, Ops: []clientv3.Op{clientv3.OpPut("/state", "1")}, Done: make(chan error, 1)},
		{Claim: slot, Ops: []clientv3.Op{clientv3.OpPut("/history/000", "2")}, Done: make(chan error, 1)},
	}
	for _, fw := range writes {
		w.Enqueue(fw)
	}
	for range writes {
		b, keys := w.next()
		if len(b) != 1 {
			t.Fatalf("batch of %d writes; want the slot's two writes one at a time", len(b))
		}
		w.commit(ctx, b, nil)
		w.land(nil, keys)
	}
	a, _ := cli.Get(ctx, "/state")
	b, _ := cli.Get(ctx, "/history/000")
	if len(a.Kvs) != 1 || len(b.Kvs) != 1 || a.Kvs[0].ModRevision >= b.Kvs[0].ModRevision {
		t.Fatalf("state %v, record %v; want both, the record at a later revision", a.Kvs, b.Kvs)
	}
}

// With transactions in flight together, a slot's writes still commit in the
// order they were queued, including the resign (the delete of its leader
// key) after its last results; other slots' writes do not wait for them.
func TestWriterKeepsEachSlotsOrderWithTransactionsInFlight(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	w := NewWriter(cli)
	const slots, writes = 8, 40
	var claims []fencing.Claim
	for i := 0; i < slots; i++ {
		key := fmt.Sprintf("/leader/%d", i)
		resp, err := cli.Put(ctx, key, "me")
		if err != nil {
			t.Fatal(err)
		}
		claims = append(claims, fencing.Claim{LeaderKey: key, Token: fencing.Token(resp.Header.Revision)})
	}
	var last []chan error
	for n := 0; n < writes; n++ {
		for i, c := range claims {
			// Each write is the slot's state and one history key, as the scheduler's are.
			fw := Write{Claim: c, Ops: []clientv3.Op{
				clientv3.OpPut(fmt.Sprintf("/state/%d", i), fmt.Sprint(n)),
				clientv3.OpPut(fmt.Sprintf("/history/%d/%d", i, n), "x"),
			}}
			w.Enqueue(fw)
		}
	}
	for _, c := range claims {
		done := make(chan error, 1)
		w.Enqueue(Write{Claim: c, Ops: []clientv3.Op{clientv3.OpDelete(c.LeaderKey)}, Done: done})
		last = append(last, done)
	}
	stop := make(chan struct{})
	close(stop)
	w.Run(ctx, stop) // commits what is queued, then returns
	for i, done := range last {
		if err := <-done; err != nil {
			t.Fatalf("slot %d resign: %v", i, err)
		}
		resp, err := cli.Get(ctx, fmt.Sprintf("/state/%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != fmt.Sprint(writes-1) {
			t.Fatalf("slot %d state %v; want its last write, %d (a later write committed first, or was fenced by the resign)", i, resp.Kvs, writes-1)
		}
		h, _ := cli.Get(ctx, fmt.Sprintf("/history/%d/", i), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if h.Count != writes {
			t.Fatalf("slot %d has %d history records; want %d", i, h.Count, writes)
		}
	}
}

// A write that must wait for its slot's batch in flight does not hold back
// the writes of other slots queued behind it.
func TestWriterLetsOtherSlotsPastAWaitingWrite(t *testing.T) {
	w := NewWriter(nil)
	a := fencing.Claim{LeaderKey: "/leader/a", Token: 1}
	b := fencing.Claim{LeaderKey: "/leader/b", Token: 1}
	put := func(c fencing.Claim, k string) Write {
		return Write{Claim: c, Ops: []clientv3.Op{clientv3.OpPut(k, "v")}}
	}
	w.Enqueue(put(a, "/state/a"))
	first, firstKeys := w.next()
	if len(first) != 1 {
		t.Fatalf("first batch %d writes; want 1", len(first))
	}
	w.Enqueue(put(a, "/history/a/1")) // a's: waits for the first batch
	w.Enqueue(put(b, "/state/b"))
	second, secondKeys := w.next()
	if len(second) != 1 || second[0].Claim != b {
		t.Fatalf("second batch %v; want b's write alone", second)
	}
	w.land(nil, firstKeys)
	third, _ := w.next()
	if len(third) != 1 || third[0].Claim != a {
		t.Fatalf("third batch %v; want a's second write", third)
	}
	w.land(nil, secondKeys)
}

// A batch stays within etcd's default 128 operations per transaction when
// some writes carry three (a record that trims the history): the write that
// would pass it leads the next batch.
func TestWriterBatchStaysWithinTheOperationLimit(t *testing.T) {
	w := NewWriter(nil)
	for i := range maxBatch {
		k := fmt.Sprintf("/s/%d", i)
		w.Enqueue(Write{Claim: fencing.Claim{LeaderKey: "/leader" + k, Token: 1},
			Ops: []clientv3.Op{clientv3.OpPut("/state"+k, "v"), clientv3.OpPut("/history"+k, "v"), clientv3.OpDelete("/history"+k+"/9", clientv3.WithPrefix())}})
	}
	seen := 0
	for seen < maxBatch {
		b, keys := w.next()
		ops := 0
		for _, fw := range b {
			ops += len(fw.Ops)
		}
		if len(b) == 0 || ops > maxTxnOps {
			t.Fatalf("batch of %d writes, %d operations; want 1 to %d operations", len(b), ops, maxTxnOps)
		}
		if seen == 0 && len(b) != maxTxnOps/3 {
			t.Fatalf("first batch %d writes; want %d", len(b), maxTxnOps/3)
		}
		seen += len(b)
		w.land(nil, keys)
	}
}

// A transaction waiting long while others still commit is a loaded etcd,
// not a stalled one: only when nothing has committed for stalledAfter does
// the writer count as stalled (fire-all fires then join the backlog).
func TestWriterIsStalledOnlyWhenNothingCommits(t *testing.T) {
	w := NewWriter(nil)
	if w.Stalled() {
		t.Fatal("stalled with nothing in flight")
	}
	w.since[1] = time.Now().Add(-2 * stalledAfter)
	w.landed = time.Now()
	if w.Stalled() {
		t.Fatal("stalled although a commit landed just now")
	}
	w.landed = time.Now().Add(-2 * stalledAfter)
	if !w.Stalled() {
		t.Fatal("not stalled: a transaction hung and nothing committed for twice stalledAfter")
	}
	delete(w.since, 1)
	if w.Stalled() {
		t.Fatal("stalled with nothing in flight")
	}
}

// A transaction in flight for stalledAfter counts as hung, although others
// commit, once one begun stalledAfter or more after it has succeeded: its
// connection died (an etcd member killed) and the client moved on. One
// overtaken by a commit begun just after it is only slow.
func TestWriterIsStalledWhenALaterCommitOvertakesAHungOne(t *testing.T) {
	w := NewWriter(nil)
	began := time.Now().Add(-3 * stalledAfter)
	w.since[1] = began
	w.landed = time.Now()
	w.overtook = began.Add(stalledAfter / 2)
	if w.Stalled() {
		t.Fatal("stalled: overtaken by a commit begun just after it, while commits land")
	}
	w.overtook = began.Add(2 * stalledAfter)
	if !w.Stalled() {
		t.Fatal("not stalled: in flight for 3×stalledAfter, overtaken by a commit begun 2×stalledAfter after it")
	}
	w.since[1] = time.Now().Add(-stalledAfter / 2)
	if w.Stalled() {
		t.Fatal("stalled: the commit in flight began only stalledAfter/2 ago")
	}
}

// The writer is behind while its oldest queued write has waited
// behindAfter, not because writes are queued, nor once they have left.
func TestWriterIsBehindOnlyWhileAWriteWaitsLong(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 20, 0, 0, time.UTC)
	w := NewWriter(nil)
	w.now = func() time.Time { return at }
	if w.Behind() {
		t.Fatal("behind with nothing queued")
	}
	w.Enqueue(Write{Claim: fencing.Claim{LeaderKey: "/leader/a", Token: 1}})
	at = at.Add(behindAfter / 2)
	w.Enqueue(Write{Claim: fencing.Claim{LeaderKey: "/leader/b", Token: 1}})
	if w.Behind() {
		t.Fatalf("behind with the oldest write queued %v ago", behindAfter/2)
	}
	at = at.Add(behindAfter / 2)
	if !w.Behind() {
		t.Fatalf("not behind with the oldest write queued %v ago", behindAfter)
	}
	if queued, oldest := w.Backlog(); queued != 2 || oldest != behindAfter {
		t.Fatalf("backlog %d writes, the oldest %v; want 2, %v", queued, oldest, behindAfter)
	}
	b, keys := w.next()
	if queued, oldest := w.Backlog(); len(b) != 2 || w.Behind() || queued != 0 || oldest != 0 {
		t.Fatalf("batch of %d writes, behind %v, backlog %d writes %v; want both taken, not behind, none", len(b), w.Behind(), queued, oldest)
	}
	w.land(nil, keys)
}

// countingKV counts the transactions committed through it.
type countingKV struct {
	clientv3.KV
	txns atomic.Int32
}

func (c *countingKV) Txn(ctx context.Context) clientv3.Txn {
	c.txns.Add(1)
	return c.KV.Txn(ctx)
}

// The writer holds lazy writes (records, starts recorded well ahead) to
// commit them together: until linger has passed since the oldest, a batch is
// full, or a write that is waited for now is queued. Then all go in one
// transaction.
func TestWriterHoldsLazyWritesUntilLingerOrAnUrgentWrite(t *testing.T) {
	put := func(k string, lazy bool) Write {
		return Write{Claim: fencing.Claim{LeaderKey: "/leader" + k, Token: 1}, Ops: []clientv3.Op{clientv3.OpPut("/state"+k, "v")},
			Done: make(chan error, 1), Lazy: lazy}
	}
	at := time.Date(2026, 12, 2, 10, 20, 0, 0, time.UTC) // 20 minutes into the hour
	writer := func() *Writer {
		w := NewWriter(nil)
		w.linger, w.now = time.Hour, func() time.Time { return at }
		return w
	}
	w := writer()
	for i := range 3 {
		w.Enqueue(put(fmt.Sprint("/lazy/", i), true))
	}
	if d := w.lingerLeft(); d != 40*time.Minute {
		t.Fatalf("holds 3 lazy writes for %v; want until the hour, 40 minutes", d)
	}
	w.Enqueue(put("/urgent", false))
	if d := w.lingerLeft(); d != 0 {
		t.Fatalf("holds an urgent write for %v", d)
	}
	b, keys := w.next()
	if len(b) != 4 || w.urgent != 0 {
		t.Fatalf("batch of %d writes, %d urgent left; want all 4, none", len(b), w.urgent)
	}
	w.land(nil, keys)
	for i := range maxInFlight*maxBatch - 1 {
		w.Enqueue(put(fmt.Sprint("/full/", i), true))
	}
	if d := w.lingerLeft(); d != 40*time.Minute {
		t.Fatalf("holds %d lazy writes for %v; want until the hour", maxInFlight*maxBatch-1, d)
	}
	w.Enqueue(put("/full/last", true))
	if d := w.lingerLeft(); d != 0 {
		t.Fatalf("holds a full batch for each transaction in flight for %v", d)
	}
	w = writer()
	w.Enqueue(put("/lazy", true))
	at = at.Add(40 * time.Minute) // the hour: every member's writer sends
	if d := w.lingerLeft(); d != 0 {
		t.Fatalf("holds a lazy write past the hour for %v", d)
	}
	w.Enqueue(put("/later", true))
	if b, keys := w.next(); len(b) != 2 {
		t.Fatalf("a batch of %d writes at the hour; want both queued", len(b))
	} else {
		w.land(nil, keys)
	}
	w.Enqueue(put("/after", true))
	if d := w.lingerLeft(); d != time.Hour {
		t.Fatalf("holds a write queued at the hour for %v; want until the next", d)
	}

	// Against etcd: three lazy writes and the urgent one that releases them
	// commit in one transaction; a lazy write alone commits once its linger
	// is over.
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	claim := heldClaim(t, cli, "/leader/held")
	kv := &countingKV{KV: cli}
	w = NewWriter(kv)
	w.linger, w.now = time.Hour, func() time.Time { return at.Add(20 * time.Minute) } // held until the urgent write
	stop := make(chan struct{})
	ran := make(chan struct{})
	go func() { w.Run(ctx, stop); close(ran) }()
	var writes []Write
	for i, lazy := range []bool{true, true, true, false} {
		fw := Write{Claim: heldClaim(t, cli, fmt.Sprint("/leader/", i)), Ops: []clientv3.Op{clientv3.OpPut(fmt.Sprint("/s/", i), "v")}, Done: make(chan error, 1), Lazy: lazy}
		writes = append(writes, fw)
		w.Enqueue(fw)
	}
	for i, fw := range writes {
		if err := kiratest.Receive(t, fw.Done, 10*time.Second, "a write's answer"); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if n := kv.txns.Load(); n != 1 {
		t.Fatalf("%d transactions; want the 4 writes in 1", n)
	}
	close(stop)
	kiratest.Receive(t, ran, 10*time.Second, "ran")

	w = NewWriter(kv)
	w.linger = 50 * time.Millisecond
	stop = make(chan struct{})
	ran = make(chan struct{})
	go func() { w.Run(ctx, stop); close(ran) }()
	alone := Write{Claim: claim, Ops: []clientv3.Op{clientv3.OpPut("/s/alone", "v")}, Done: make(chan error, 1), Lazy: true}
	w.Enqueue(alone)
	if err := kiratest.Receive(t, alone.Done, 10*time.Second, "the lazy write's answer"); err != nil {
		t.Fatal(err)
	}
	close(stop)
	kiratest.Receive(t, ran, 10*time.Second, "ran")
}

func TestWriterRefusesRatherThanBlocks(t *testing.T) {
	w := NewWriter(nil)
	w.limit = 1
	w.Enqueue(Write{})
	done := make(chan error, 1)
	w.Enqueue(Write{Done: done}) // the queue is full: refused at once
	if err := <-done; !errors.Is(err, ErrBehind) {
		t.Fatalf("full queue: %v; want ErrBehind", err)
	}
}

// A slot's last write (a resign) is queued even when the queue is full, and
// commits after the slot's writes queued before it: refusing it would leave
// the resign to a direct delete that fences those writes out.
func TestWriterQueuesALastWriteWhenFull(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	a := heldClaim(t, cli, "/leader/a")
	w := NewWriter(cli)
	w.limit = 1
	result := Write{Claim: a, Ops: []clientv3.Op{clientv3.OpPut("/s/a", "result")}, Done: make(chan error, 1)}
	w.Enqueue(result)
	refused := Write{Claim: a, Ops: []clientv3.Op{clientv3.OpPut("/s/b", "x")}, Done: make(chan error, 1)}
	w.Enqueue(refused)
	if err := kiratest.Receive(t, refused.Done, 5*time.Second, "the refused write's answer"); !errors.Is(err, ErrBehind) {
		t.Fatalf("an ordinary write to a full queue: %v; want ErrBehind", err)
	}
	resign := Write{Claim: a, Ops: []clientv3.Op{clientv3.OpPut("/s/a", "state"), clientv3.OpDelete(a.LeaderKey)}, Done: make(chan error, 1), Last: true}
	w.Enqueue(resign)
	stop := make(chan struct{})
	close(stop)
	w.Run(ctx, stop) // commits what is queued, then returns
	for _, fw := range []Write{result, resign} {
		if err := kiratest.Receive(t, fw.Done, 5*time.Second, "a queued write's answer"); err != nil {
			t.Fatalf("a write queued before the queue filled, or the last write: %v", err)
		}
	}
	resp, err := cli.Get(ctx, "/s/a")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "state" {
		t.Fatalf("/s/a: %v %v; want the last write's value after the result's", resp, err)
	}
}

// Amend replaces a queued write of a slot only while it is that slot's last
// queued write and carries the tag; what it replaced is what commits.
func TestAmendReplacesOnlyTheSlotsLastQueuedWrite(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	a, b := heldClaim(t, cli, "/leader/a"), heldClaim(t, cli, "/leader/b")
	w := NewWriter(cli)
	w.linger = time.Hour // nothing commits until stop
	put := func(k, v string) []clientv3.Op { return []clientv3.Op{clientv3.OpPut(k, v)} }
	tag := new(int)
	w.Enqueue(Write{Claim: a, Ops: put("/s/a", "1"), Lazy: true, Tag: tag})
	w.Enqueue(Write{Claim: b, Ops: put("/s/b", "1"), Lazy: true})
	if !w.Amend(a.LeaderKey, tag, put("/s/a", "2"), nil) {
		t.Fatal("the slot's last queued write, another slot's queued after it: not amended")
	}
	if w.Amend(a.LeaderKey, new(int), put("/s/a", "3"), nil) || w.Amend(a.LeaderKey, nil, put("/s/a", "3"), nil) {
		t.Fatal("amended with another tag")
	}
	w.Enqueue(Write{Claim: a, Ops: put("/s/a2", "1"), Lazy: true})
	if w.Amend(a.LeaderKey, tag, put("/s/a", "4"), nil) {
		t.Fatal("amended a write the slot has queued another after")
	}
	stop := make(chan struct{})
	close(stop)
	w.Run(ctx, stop) // commits what is queued, then returns
	resp, err := cli.Get(ctx, "/s/a")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "2" {
		t.Fatalf("/s/a: %v %v; want the amended 2", resp, err)
	}
	if w.Amend(a.LeaderKey, tag, put("/s/a", "5"), nil) {
		t.Fatal("amended a write already committed")
	}
}
