package config

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kira-scheduler/kira/internal/keyspace"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
)

// The per-job layout (docs/catalog.md, "How the catalog is stored in etcd"):
// the settings in one key and each job in a key of its own, under the
// generation that catalog-head names; catalog-head's mod revision is the
// catalog revision. TestPerJobLayout holds this file and perjobread.go.

// Bounds of one transaction of the per-job store, under etcd's defaults
// (--max-txn-ops 128, --max-request-bytes 1.5 MiB): an apply within them is
// one transaction, a bigger one is staged under a new generation.
const (
	MaxTxnOps   = 128
	MaxTxnBytes = 1 << 20
	// stageWriters is how many transactions of a stage are in flight.
	stageWriters = 8
	// StageTxnOps is how many operations a stage's transaction carries
	// where etcd takes them (kira etcd's --max-txn-ops): fewer, larger
	// transactions cost etcd less per job (docs/benchmarks.md, "Many
	// jobs"). Against an etcd that refuses so many, as etcd's own default
	// does, the stage goes on in transactions of MaxTxnOps
	// (TestStageInLargeTransactionsWhereEtcdTakesThem).
	StageTxnOps = 1024
)

// legacyMarker replaces the single catalog key at the first per-job store:
// an older version reads it as a catalog with a field it does not know, and
// refuses it (decodeStored).
func legacyMarker(cluster string) string {
	return fmt.Sprintf(`{"layout":"per-job","cluster":%q}`, cluster)
}

// storedSettings is a catalog's settings as stored in the per-job layout.
// Its notify default is stored here once: NotifyOnce says so, and that the
// jobs that have it are marked (storedJob.NotifyDefault) rather than hold a
// copy. Settings without NotifyOnce were stored by an older version, whose
// jobs hold copies (resolveNotify). An older version refuses NotifyOnce as
// a field it does not know, rather than run those jobs without their rules
// (TestNotifyDefaultIsStoredOnce).
type storedSettings struct {
	Cluster    string         `json:"cluster"`
	Membership Membership     `json:"membership"`
	Notify     []NotifyRule   `json:"notify,omitempty"`
	NotifyOnce bool           `json:"notify_once,omitempty"`
	Pools      map[string]int `json:"pools,omitempty"`
}

// settingsOf is cat's settings as stored.
func settingsOf(cat *Catalog) storedSettings {
	return storedSettings{Cluster: cat.Cluster, Membership: cat.Membership, Notify: cat.Notify, NotifyOnce: len(cat.Notify) > 0, Pools: cat.Pools}
}

// head is catalog-head's value. Refs says the generation's reference keys
// (keyspace.CatalogRef) are complete: every write of this version keeps
// them; a generation an older version stored has none, and a single-job
// delete there reads the generation's jobs instead (dependentsOf).
type head struct {
	Generation int64 `json:"generation"`
	Refs       bool  `json:"refs,omitempty"`
}

// storedJob is a job's value in the per-job layout: the job, its manager
// (manager.go; none: stored by an older version, apply's) and its
// position, which orders the catalog's jobs as its file did; a job PutJob
// created has position 0, and orders after every positioned job, by name
// (byPosition). A job that has the catalog's notify default is stored with
// NotifyDefault and without the rules, which the settings hold once
// (TestNotifyDefaultIsStoredOnce).
type storedJob struct {
	Position      int64   `json:"position"`
	Job           Job     `json:"job"`
	NotifyDefault bool    `json:"notify_default,omitempty"`
	Manager       Manager `json:"manager,omitempty"`
	// Created is the job's create revision (Job.CreateRevision) when its
	// key's is not: the job was carried into its generation by a staged
	// store, or from the single key (createdUnknown). 0: its key's create
	// revision is the job's. An older version refuses the field, as a
	// field it does not know.
	Created int64 `json:"created,omitempty"`
}

// createdUnknown is the create revision of a job carried from the single
// key of an older version, which did not record one: every state of its
// slots is its own, as before.
const createdUnknown = 1

// createRevision is the job's create revision, its key being kv.
func (s *storedJob) createRevision(kv *mvccpb.KeyValue) int64 {
	if s.Created != 0 {
		return s.Created
	}
	return kv.CreateRevision
}

// byPosition orders stored jobs: by position, the unpositioned (0) last,
// then by name (TestConcurrentPutsOfDifferentJobs).
func byPosition(a, b storedJob) int {
	switch {
	case a.Position != b.Position && a.Position != 0 && b.Position != 0:
		return cmp.Compare(a.Position, b.Position)
	case a.Position != b.Position:
		return cmp.Compare(b.Position, a.Position) // 0 last
	}
	return strings.Compare(a.Job.Name, b.Job.Name)
}

// MarshalJSON writes s as stored: the notify default as a mark, not a copy.
func (s storedJob) MarshalJSON() ([]byte, error) {
	type plain storedJob // without this method
	p := plain(s)
	if s.Job.NotifyDefault {
		p.Job.Notify, p.NotifyDefault = nil, true
	}
	return json.Marshal(p)
}

// positionStride spaces the positions of a catalog stored whole, so that
// jobs inserted later fit between them.
const positionStride = 1 << 20

// positions gives each of jobs a position that orders them: its stored one
// (in stored, by name) wherever that keeps the order, so a change, an
// append or a removal rewrites no other job; the others take positions
// between those kept, and when there is no room every job is renumbered
// (TestJobPositions).
func positions(jobs []Job, stored map[string]int64) []int64 {
	out := make([]int64, len(jobs))
	kept := make([]bool, len(jobs))
	last := int64(0)
	for i, j := range jobs {
		if p, ok := stored[j.Name]; ok && p > last {
			out[i], kept[i], last = p, true, p
		}
	}
	prev := int64(0)
	for i := 0; i < len(jobs); {
		if kept[i] {
			prev = out[i]
			i++
			continue
		}
		k := i
		for k < len(jobs) && !kept[k] {
			k++
		}
		step := int64(positionStride)
		if k < len(jobs) {
			if step = (out[k] - prev) / int64(k-i+1); step < 1 {
				return positions(jobs, nil)
			}
		}
		for ; i < k; i++ {
			prev += step
			out[i] = prev
		}
	}
	return out
}

// jobMeta is what the store records of a job beside it: its position, its
// manager and its storedJob.Created.
type jobMeta struct {
	pos     int64
	manager Manager
	created int64
}

// metaOf gives each of cat's jobs, all managed by m, a position over the
// stored ones (positions).
func metaOf(jobs []Job, stored map[string]int64, m Manager) []jobMeta {
	pos := positions(jobs, stored)
	meta := make([]jobMeta, len(jobs))
	for i := range meta {
		meta[i] = jobMeta{pos: pos[i], manager: m}
	}
	return meta
}

// encodeJobs is cat as the per-job layout stores it with meta (one per job):
// its settings and each job's value, by name, within the bounds of what is
// stored (storedValues).
func encodeJobs(cat *Catalog, meta []jobMeta) (sets []byte, jobs map[string][]byte, err error) {
	jobs = make(map[string][]byte, len(cat.Jobs))
	err = storedValues(cat, meta, func(job string, v []byte) {
		if job == "" {
			sets = v
		} else {
			jobs[job] = v
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return sets, jobs, nil
}

// PutJobs stores cat in the per-job layout, with how it was stored (src),
// only if the stored catalog's revision (either layout) is still expected
// (0: none is stored; Force: any); otherwise it returns a *ConflictError
// and no stored catalog changes. Members never observe a half-done store:
// within MaxTxnOps and MaxTxnBytes it is one transaction of the changes
// against the stored generation; beyond them, a stage under a new
// generation that one transaction makes current. It returns the new
// catalog revision. The stored jobs of other managers are kept, and a job
// of cat that another manager holds is a *ManagerConflictError
// (PutJobsWith, combine).
func PutJobs(ctx context.Context, kv clientv3.KV, cat *Catalog, src Source, expected int64) (int64, error) {
	return PutJobsWith(ctx, kv, cat, src, expected, WholeOptions{})
}

// PutJobsWith is PutJobs with what to do with the stored jobs of other
// managers (WholeOptions).
func PutJobsWith(ctx context.Context, kv clientv3.KV, cat *Catalog, src Source, expected int64, opt WholeOptions) (int64, error) {
	return putOver(ctx, kv, cat, src, expected, nil, opt)
}

// putOver is PutJobsWith whose first attempt takes read, the stored
// catalog its caller has just read (nil: read it), rather than read it
// again.
func putOver(ctx context.Context, kv clientv3.KV, cat *Catalog, src Source, expected int64, read *Stored, opt WholeOptions) (int64, error) {
	if err := encode(cat); err != nil {
		return 0, err
	}
	source, err := json.Marshal(src)
	if err != nil {
		return 0, err
	}
	for range 10 {
		cur := read
		if read == nil {
			cur, err = Read(ctx, kv, cat.Cluster, 0)
		}
		read = nil
		switch {
		case errors.Is(err, ErrNoCatalog):
			cur = nil
		case err != nil && cur == nil:
			return 0, err
		}
		at := int64(0)
		if cur != nil {
			at = cur.Revision
		}
		if expected != Force && expected != at {
			return 0, &ConflictError{Expected: expected, Current: cur}
		}
		wh, err := combine(cat, src, cur, opt)
		if err != nil {
			return 0, err
		}
		sets, jobs, err := encodeJobs(wh.cat, wh.meta)
		if err != nil {
			return 0, err
		}
		w := jobsWrite{kv: kv, cluster: cat.Cluster, cur: cur, sets: sets, jobs: jobs, refs: refsOf(wh.cat), source: source, carried: carried(wh, cur)}
		rev, ok, err := w.store(ctx)
		if err != nil || ok {
			return rev, err
		}
		if expected != Force {
			cur, err := Read(ctx, kv, cat.Cluster, 0)
			if errors.Is(err, ErrNoCatalog) {
				cur = nil
			} else if err != nil && cur == nil {
				return 0, err
			}
			return 0, &ConflictError{Expected: expected, Current: cur}
		}
	}
	return 0, errors.New("config: the stored catalog changed ten times during this store; store it again")
}

// jobsWrite is one attempt of PutJobs over the stored catalog cur (nil:
// none).
type jobsWrite struct {
	kv      clientv3.KV
	cluster string
	cur     *Stored
	sets    []byte
	jobs    map[string][]byte
	refs    map[ref]bool
	source  []byte
	// carried are the create revisions of the jobs cur has whose key's
	// create revision is theirs: a staged store, whose keys are new,
	// records them in the values (storedJob.Created).
	carried map[string]int64
}

// carried is jobsWrite.carried of the write of wh over cur: a job of cur
// from the single key has no create revision, and counts as created
// before every state (createdUnknown). Held by
// TestAJobKeepsItsCreateRevisionUntilDeleted.
func carried(wh *whole, cur *Stored) map[string]int64 {
	if cur == nil || cur.Catalog == nil {
		return nil
	}
	had := make(map[string]int64, len(cur.Catalog.Jobs))
	for _, j := range cur.Catalog.Jobs {
		had[j.Name] = max(j.CreateRevision, createdUnknown)
	}
	out := map[string]int64{}
	for i, j := range wh.cat.Jobs {
		if c, ok := had[j.Name]; ok && wh.meta[i].created == 0 {
			out[j.Name] = c
		}
	}
	return out
}

// carry records w.carried in the values of its jobs, for a stage.
func (w *jobsWrite) carry() error {
	for name, c := range w.carried {
		var sj storedJob
		if err := json.Unmarshal(w.jobs[name], &sj); err != nil {
			return err
		}
		sj.Created = c
		v, err := json.Marshal(sj)
		if err != nil {
			return err
		}
		w.jobs[name] = v
	}
	return nil
}

// guard is the comparison that makes a write conditional on cur still
// being the stored catalog.
func (w *jobsWrite) guard() []clientv3.Cmp {
	h := keyspace.CatalogHead(w.cluster)
	if w.cur != nil && (w.cur.perJob != nil || w.cur.head) {
		return []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(h), "=", w.cur.Revision)}
	}
	legacy := int64(0)
	if w.cur != nil {
		legacy = w.cur.Revision
	}
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(h), "=", 0),
		clientv3.Compare(clientv3.ModRevision(keyspace.Catalog(w.cluster)), "=", legacy),
	}
}

// store writes the catalog, ok false when cur is no longer stored. Over a
// stored catalog that could not be read (a forced Apply), it stages a new
// generation: the unreadable one goes whole (TestForcedApplyReplacesAnUnreadableCatalog).
func (w *jobsWrite) store(ctx context.Context) (rev int64, ok bool, err error) {
	if w.cur != nil && w.cur.perJob != nil && w.cur.Catalog != nil {
		ops, size := w.delta()
		if len(ops)+4 <= MaxTxnOps && size <= MaxTxnBytes { // with catalog-head, catalog-source and the two deletes below
			// Generations other than the current one are stages and
			// replaced generations a staged store left when it lost its last
			// answer (TestStagedStoreWhoseAnswerIsLost), or the stage of a
			// store in flight, whose flip this change refuses (it moves
			// catalog-head): they go with the change. Usually there are none,
			// and etcd deletes nothing.
			g := w.cur.perJob.generation
			root := keyspace.CatalogGenerationsRoot(w.cluster)
			ops = append(ops, clientv3.OpDelete(root, clientv3.WithRange(keyspace.CatalogGeneration(w.cluster, g))),
				clientv3.OpDelete(keyspace.CatalogGeneration(w.cluster, g+1), clientv3.WithRange(clientv3.GetPrefixRangeEnd(root))))
			return w.commit(ctx, g, ops)
		}
	}
	return w.staged(ctx)
}

// delta is the operations that turn the stored generation into the new
// catalog, catalog-head and catalog-source included, and their bytes.
func (w *jobsWrite) delta() (ops []clientv3.Op, size int) {
	g := w.cur.perJob.generation
	put := func(key string, v []byte) {
		ops = append(ops, clientv3.OpPut(key, string(v)))
		size += len(key) + len(v)
	}
	if !bytes.Equal(w.cur.perJob.settings, w.sets) {
		put(keyspace.CatalogSettings(w.cluster, g), w.sets)
	}
	for name, v := range w.jobs {
		old, ok := w.cur.perJob.job(name)
		if stored, err := json.Marshal(old); !ok || err != nil || !bytes.Equal(stored, v) || w.cur.perJob.copied(old.Job) {
			put(keyspace.CatalogJob(w.cluster, g, name), v)
		}
	}
	for name := range w.cur.perJob.positions {
		if _, ok := w.jobs[name]; !ok {
			ops = append(ops, clientv3.OpDelete(keyspace.CatalogJob(w.cluster, g, name)))
			size += len(keyspace.CatalogJob(w.cluster, g, name))
		}
	}
	var had map[ref]bool
	if w.cur.perJob.refs {
		had = refsOf(w.cur.Catalog)
	}
	for r := range w.refs {
		if !had[r] {
			put(r.key(w.cluster, g), nil)
		}
	}
	for r := range had {
		if !w.refs[r] {
			ops = append(ops, clientv3.OpDelete(r.key(w.cluster, g)))
			size += len(r.key(w.cluster, g))
		}
	}
	return ops, size + 2*len(w.source) // catalog-head and catalog-source, at most
}

// commit makes generation g current in one transaction with ops, guarded;
// the first per-job store also replaces the single key with legacyMarker.
func (w *jobsWrite) commit(ctx context.Context, g int64, ops []clientv3.Op) (int64, bool, error) {
	h, _ := json.Marshal(head{Generation: g, Refs: true})
	ops = append(ops, clientv3.OpPut(keyspace.CatalogHead(w.cluster), string(h)), clientv3.OpPut(keyspace.CatalogSource(w.cluster), string(w.source)))
	if w.cur == nil || w.cur.perJob == nil {
		ops = append(ops, clientv3.OpPut(keyspace.Catalog(w.cluster), legacyMarker(w.cluster)))
	}
	resp, err := w.kv.Txn(ctx).If(w.guard()...).Then(ops...).Commit()
	if err != nil {
		return 0, false, fmt.Errorf("config: store catalog: %w", err)
	}
	return resp.Header.Revision, resp.Succeeded, nil
}

// staged writes the catalog under a new generation, in transactions
// (writeStage) that no member reads, then makes it current in
// one guarded transaction, and deletes every lower generation: the one it
// replaced and stages left by stores that lost or died. A stage whose
// commit is refused is deleted.
func (w *jobsWrite) staged(ctx context.Context) (int64, bool, error) {
	if err := w.carry(); err != nil {
		return 0, false, fmt.Errorf("config: store catalog: %w", err)
	}
	gen, err := w.kv.Put(ctx, keyspace.CatalogGenerations(w.cluster), "")
	if err != nil {
		return 0, false, fmt.Errorf("config: store catalog: %w", err)
	}
	g := gen.Header.Revision
	puts := make([]clientv3.Op, 0, 1+len(w.jobs))
	puts = append(puts, clientv3.OpPut(keyspace.CatalogSettings(w.cluster, g), string(w.sets)))
	for name, v := range w.jobs {
		puts = append(puts, clientv3.OpPut(keyspace.CatalogJob(w.cluster, g, name), string(v)))
	}
	for r := range w.refs {
		puts = append(puts, clientv3.OpPut(r.key(w.cluster, g), ""))
	}
	if err := w.writeStage(ctx, puts); err != nil {
		// Best effort: a stage left here goes with the next staged store.
		w.kv.Delete(context.WithoutCancel(ctx), keyspace.CatalogGeneration(w.cluster, g), clientv3.WithPrefix())
		return 0, false, fmt.Errorf("config: store catalog: %w", err)
	}
	rev, ok, err := w.commit(ctx, g, nil)
	if err != nil {
		// The last transaction may have been applied though its answer was
		// lost: the stage may be the stored catalog, so it stays (the next
		// staged store deletes it if it is not).
		return 0, false, fmt.Errorf("config: store catalog: %w", err)
	}
	if !ok {
		// Refused: the stage is no one's. Best effort: one left here goes
		// with the next staged store.
		w.kv.Delete(context.WithoutCancel(ctx), keyspace.CatalogGeneration(w.cluster, g), clientv3.WithPrefix())
		return 0, false, nil
	}
	root := keyspace.CatalogGenerationsRoot(w.cluster)
	// Best effort too: generations left here go with the next staged store.
	w.kv.Delete(ctx, root, clientv3.WithRange(keyspace.CatalogGeneration(w.cluster, g)))
	return rev, true, nil
}

// writeStage writes puts in transactions of StageTxnOps, or of MaxTxnOps
// once etcd refuses the first as too many, each within MaxTxnBytes.
func (w *jobsWrite) writeStage(ctx context.Context, puts []clientv3.Op) error {
	batches := batchPuts(puts, StageTxnOps)
	_, err := w.kv.Txn(ctx).Then(batches[0]...).Commit()
	switch {
	case errors.Is(err, rpctypes.ErrTooManyOps):
		batches = batchPuts(puts, MaxTxnOps)
	case err != nil:
		return err
	default:
		batches = batches[1:]
	}
	// The stage's transactions are independent of each other: several in
	// flight hide the round trip and fsync of each.
	writers, wctx := errgroup.WithContext(ctx)
	writers.SetLimit(stageWriters)
	for _, b := range batches {
		writers.Go(func() error {
			_, err := w.kv.Txn(wctx).Then(b...).Commit()
			return err
		})
	}
	return writers.Wait()
}

// batchPuts splits puts into batches of at most ops operations and
// MaxTxnBytes of keys and values.
func batchPuts(puts []clientv3.Op, ops int) (batches [][]clientv3.Op) {
	var batch []clientv3.Op
	size := 0
	for _, p := range puts {
		n := len(p.KeyBytes()) + len(p.ValueBytes())
		if len(batch) == ops || len(batch) > 0 && size+n > MaxTxnBytes {
			batches, batch, size = append(batches, batch), nil, 0
		}
		batch = append(batch, p)
		size += n
	}
	return append(batches, batch)
}
