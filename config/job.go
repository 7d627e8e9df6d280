package config

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kira-scheduler/kira/internal/keyspace"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// One job is its own object (docs/catalog.md, "Writing one job";
// docs/decisions/0046-a-job-is-its-own-object.md): GetJob, PutJob and
// DeleteJob read and write one job of the stored catalog without reading or
// writing the others. A write reads catalog-head, the settings, the job and
// the keys the rules across jobs need (a JobWriter keeps the first three
// from its last writes and reads them only when a guard fails:
// jobwriter.go), then commits one transaction that
// writes the job's key, puts catalog-head again (its mod revision is the
// catalog revision members watch) and records the change (catalog-change),
// guarded by catalog-head's value (the generation, not its mod revision:
// writes of different jobs do not conflict), the job's mod revision as
// read, the settings' and every key the rules read. A guard that fails is
// another write landing in between: the write decides again on what the
// failed transaction answered, up to jobAttempts times (TestConcurrentPutsOfDifferentJobs).
//
// The rules across jobs hold after every write: the after: targets of a
// put job exist (their keys guarded), it closes no cycle (the keys walked
// guarded), its pool exists (the settings guarded); a delete is refused
// while a job runs after it (keyspace.CatalogRefs empty, guarded by a range
// compare); names are unique, being keys. A create keeps the jobs at most
// MaxJobs by a bound of them that catalog-head's version keeps current,
// guarded (jobcount.go).
// MaxStoredCatalogBytes is not checked by a single-job write, which would
// have to read every job: each job is held to MaxTxnBytes, and the next
// whole write checks the whole (TestSingleJobRulesAcrossJobs).

// jobAttempts bounds the attempts of a single-job write.
const jobAttempts = 10

// StoredJob is one job as stored.
type StoredJob struct {
	Job     Job
	Manager Manager
	// Revision is the job's key's mod revision: the catalog revision of
	// the last write of this job (PutJobOptions.IfRevision).
	Revision int64
	// CatalogRevision is the stored catalog's revision it was read at.
	CatalogRevision int64
}

// PutJobOptions are PutJob's.
type PutJobOptions struct {
	// Manager is who writes: api:<name> or cli:<name> (required).
	Manager Manager
	// IfRevision, when not 0, is the revision the job must be at (its
	// Revision, as GetJob read it): else a *PreconditionError.
	IfRevision int64
	// CreateOnly refuses a job that exists, with a *PreconditionError.
	CreateOnly bool
	// Force takes over a job another manager holds; without it, that is a
	// *ManagerConflictError.
	Force bool
	// Check, if set, is asked before each attempt commits, with the job as
	// stored (nil: none) and as it would be (nil for a delete): an error
	// it returns is PutJob's or DeleteJob's, and nothing is written. The
	// stored job it saw is guarded, so a scope the API checks with it
	// holds at the commit (TestJobDefinitionScopes in package api).
	Check func(stored, next *Job) error
}

// DeleteJobOptions are DeleteJob's, as PutJobOptions.
type DeleteJobOptions struct {
	Manager    Manager
	IfRevision int64
	Force      bool
	Check      func(stored, next *Job) error
}

// JobWritten is what PutJob did.
type JobWritten struct {
	Job string
	// Revision is the job's new revision, which is the catalog's; when
	// Unchanged, its revision as stored.
	Revision int64
	Created  bool
	// Unchanged: the job was stored already, the same, by the same
	// manager; nothing was written.
	Unchanged bool
	Manager   Manager
	// Previous is the manager it was taken over from (Force); "" if none.
	Previous Manager
}

// JobChange is what catalog-change records of a single-job write, for
// kira catalog --history: who changed which job, how, and when.
type JobChange struct {
	By  Manager   `json:"by"`
	Job string    `json:"job"`
	Op  string    `json:"op"` // created, replaced, deleted
	At  time.Time `json:"at"`
}

func (c *JobChange) String() string {
	return fmt.Sprintf("%s job %s by %s at %s", c.Op, c.Job, c.By, c.At.UTC().Format(time.RFC3339))
}

// GetJob reads job name of the cluster's stored catalog: ErrNoCatalog
// without one, ErrNoJob when it has no such job (TestSingleJobWrites).
func GetJob(ctx context.Context, kv clientv3.KV, cluster, name string) (*StoredJob, error) {
	v, err := readJobView(ctx, kv, cluster, name, 0)
	if err != nil {
		return nil, err
	}
	if v.job == nil {
		return nil, noJob(name, cluster)
	}
	return v.stored(), nil
}

// jobView is what a single-job write reads: catalog-head, the settings
// and the job, each with its mod revision; read from etcd in this call
// (fresh) or what a JobWriter kept (jobwriter.go).
type jobView struct {
	cluster, name string
	headValue     []byte
	head          head
	headRev       int64
	headVer       int64 // catalog-head's version (jobcount.go)
	srcRev        int64 // catalog-source's mod revision
	at            int64 // an etcd revision answered before the view was made
	sets          storedSettings
	setsRev       int64
	job           *storedJob // nil: not stored
	jobValue      []byte
	jobRev        int64
	// fresh: read from etcd by this write, not kept from an earlier one.
	fresh bool
	// deps, when depsRead, are jobs that run after this one, read with
	// the view (a delete's failed guard answers them).
	deps     []string
	depsRead bool
}

// readJobView reads catalog-head, then the settings and the job; with gen
// (the generation catalog-head last named; 0: none known) all three in one
// request, and again in two when catalog-head names another generation.
func readJobView(ctx context.Context, kv clientv3.KV, cluster, name string, gen int64) (*jobView, error) {
	if gen > 0 {
		resp, err := kv.Txn(ctx).Then(viewOps(cluster, gen, name)...).Commit()
		if err != nil {
			return nil, fmt.Errorf("config: read job %s: %w", name, err)
		}
		if v, err := viewFrom(cluster, name, gen, resp); v != nil || err != nil {
			return v, err
		}
	}
	h, err := kv.Get(ctx, keyspace.CatalogHead(cluster))
	if err != nil {
		return nil, fmt.Errorf("config: read job %s: %w", name, err)
	}
	if len(h.Kvs) == 0 {
		return nil, noHead(ctx, kv, cluster)
	}
	v := &jobView{cluster: cluster, name: name, headValue: h.Kvs[0].Value, headRev: h.Kvs[0].ModRevision, headVer: h.Kvs[0].Version, fresh: true}
	if err := strict(keyspace.CatalogHead(cluster), v.headValue, &v.head); err != nil {
		return nil, err
	}
	resp, err := kv.Txn(ctx).Then(viewOps(cluster, v.head.Generation, name)[1:]...).Commit()
	if err != nil {
		return nil, fmt.Errorf("config: read job %s: %w", name, err)
	}
	v.at, v.srcRev = resp.Header.Revision, modRevision(resp.Responses[2].GetResponseRange().Kvs)
	return v, v.fill(resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs)
}

// viewOps read what a jobView holds in generation gen: catalog-head, the
// settings, the job and catalog-source's mod revision (jobcount.go).
func viewOps(cluster string, gen int64, name string) []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpGet(keyspace.CatalogHead(cluster)),
		clientv3.OpGet(keyspace.CatalogSettings(cluster, gen)),
		clientv3.OpGet(keyspace.CatalogJob(cluster, gen, name)),
		clientv3.OpGet(keyspace.CatalogSource(cluster), clientv3.WithKeysOnly()),
	}
}

// viewFrom is the fresh view of viewOps' answers, the first of resp's;
// nil when catalog-head is absent or names another generation than gen:
// read it again in two steps.
func viewFrom(cluster, name string, gen int64, resp *clientv3.TxnResponse) (*jobView, error) {
	h := resp.Responses[0].GetResponseRange().Kvs
	if len(h) == 0 {
		return nil, nil
	}
	v := &jobView{cluster: cluster, name: name, headValue: h[0].Value, headRev: h[0].ModRevision, headVer: h[0].Version,
		srcRev: modRevision(resp.Responses[3].GetResponseRange().Kvs), at: resp.Header.Revision, fresh: true}
	if err := strict(keyspace.CatalogHead(cluster), v.headValue, &v.head); err != nil {
		return nil, err
	}
	if v.head.Generation != gen {
		return nil, nil
	}
	return v, v.fill(resp.Responses[1].GetResponseRange().Kvs, resp.Responses[2].GetResponseRange().Kvs)
}

// fill reads the settings and the job of v's generation into v.
func (v *jobView) fill(sets, job []*mvccpb.KeyValue) error {
	if len(sets) == 0 {
		return fmt.Errorf("%w: generation %d has no settings", ErrUnreadableCatalog, v.head.Generation)
	}
	if err := strict(string(sets[0].Key), sets[0].Value, &v.sets); err != nil {
		return err
	}
	v.setsRev = sets[0].ModRevision
	if len(job) > 0 {
		var err error
		if v.job, err = decodeStoredJob(job[0], v.name, v.sets); err != nil {
			return err
		}
		v.jobValue, v.jobRev = job[0].Value, job[0].ModRevision
	}
	return nil
}

// noHead is the error of a cluster without catalog-head: none stored, or
// one in the single key of an older version, which a single-job write does
// not convert.
func noHead(ctx context.Context, kv clientv3.KV, cluster string) error {
	resp, err := kv.Get(ctx, keyspace.Catalog(cluster), clientv3.WithCountOnly())
	switch {
	case err != nil:
		return fmt.Errorf("config: load catalog: %w", err)
	case resp.Count > 0:
		return fmt.Errorf("config: the catalog of cluster %s is stored in the single key of an older version of Kira: store it once with kira apply of this version before writing one job", cluster)
	}
	return fmt.Errorf("%w %q: store one (kira apply) before writing one job", ErrNoCatalog, cluster)
}

// decodeStoredJob reads a job's key, its notify rules in force under sets.
func decodeStoredJob(kv *mvccpb.KeyValue, name string, sets storedSettings) (*storedJob, error) {
	var j storedJob
	if err := strict(string(kv.Key), kv.Value, &j); err != nil {
		return nil, err
	}
	if j.Job.Name != name {
		return nil, fmt.Errorf("%w: %s holds job %q (written by hand?)", ErrUnreadableCatalog, kv.Key, j.Job.Name)
	}
	j.Job.NotifyDefault = j.NotifyDefault
	j.Job.CreateRevision = j.createRevision(kv)
	resolveNotify(&j.Job, sets.Notify, sets.NotifyOnce)
	j.Manager = intern(j.Manager)
	return &j, nil
}

func (v *jobView) stored() *StoredJob {
	return &StoredJob{Job: v.job.Job, Manager: Manager(v.job.Manager.String()), Revision: v.jobRev, CatalogRevision: v.headRev}
}

// key is the job's key.
func (v *jobView) key() string { return keyspace.CatalogJob(v.cluster, v.head.Generation, v.name) }

// guards are the comparisons every single-job write makes: the generation,
// the settings and the job are as read.
func (v *jobView) guards() []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.Value(keyspace.CatalogHead(v.cluster)), "=", string(v.headValue)),
		clientv3.Compare(clientv3.ModRevision(keyspace.CatalogSettings(v.cluster, v.head.Generation)), "=", v.setsRev),
		clientv3.Compare(clientv3.ModRevision(v.key()), "=", v.jobRev),
	}
}

// bump is the operations every single-job write ends with: catalog-head
// put again, answering its version before (headBefore), the change
// recorded.
func (v *jobView) bump(by Manager, op string) []clientv3.Op {
	change, _ := json.Marshal(JobChange{By: by, Job: v.name, Op: op, At: time.Now().UTC()})
	return []clientv3.Op{
		clientv3.OpPut(keyspace.CatalogHead(v.cluster), string(v.headValue), clientv3.WithPrevKV()),
		clientv3.OpPut(keyspace.CatalogChange(v.cluster), string(change)),
	}
}

// headBefore is catalog-head's version before the committed write of
// resp, whose put of it (bump) answers its previous value.
func headBefore(resp *clientv3.TxnResponse) int64 {
	for _, r := range resp.Responses {
		if p := r.GetResponsePut(); p != nil && p.PrevKv != nil {
			return p.PrevKv.Version
		}
	}
	return 0
}

// allowed checks the write's conditions against the job as read: its
// manager (force takes it over), its revision, create only.
func (v *jobView) allowed(ctx context.Context, kv clientv3.KV, by Manager, ifRev int64, createOnly, force bool) error {
	switch {
	case createOnly && v.job != nil:
		return &PreconditionError{Job: v.name, Stored: v.jobRev}
	case ifRev != 0 && v.jobRev != ifRev:
		return &PreconditionError{Job: v.name, Want: ifRev, Stored: v.jobRev, Differs: v.differs(ctx, kv, ifRev)}
	case v.job != nil && Manager(v.job.Manager.String()) != by && !force:
		return &ManagerConflictError{By: by, Conflicts: []ManagerConflict{{Job: v.name, Manager: Manager(v.job.Manager.String())}}}
	}
	return nil
}

// differs says what changed in the job from revision rev to the one read;
// nil when rev cannot be read as this job's, or v is not fresh (its
// answer is not given: the write reads the job again).
func (v *jobView) differs(ctx context.Context, kv clientv3.KV, rev int64) []string {
	if v.job == nil || !v.fresh {
		return nil
	}
	resp, err := kv.Get(ctx, v.key(), clientv3.WithRev(rev))
	if err != nil || len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != rev {
		return nil
	}
	old, err := decodeStoredJob(resp.Kvs[0], v.name, v.sets)
	if err != nil {
		return nil
	}
	out := fieldChanges(old.Job, v.job.Job)
	if a, b := old.Manager.String(), v.job.Manager.String(); a != b {
		out = append(out, fmt.Sprintf("manager: %s → %s", a, b))
	}
	if len(out) == 0 {
		out = []string{"written again, the same"}
	}
	return out
}

// lostWrite is a single-job write whose answer etcd lost: the next
// attempt's read decides whether it was applied.
type lostWrite struct {
	at      int64  // the etcd revision the lost attempt read at
	before  int64  // the job's mod revision it read
	value   []byte // what it wrote; nil for a delete
	created bool
	err     error
}

// applied reports whether the read v shows the lost write w applied: the
// job holds w's value, written after w's read (a delete: the job is gone).
// False when v shows it was not (nil w: none was lost); an error when it
// cannot tell (TestPutJobWhoseAnswerIsLost).
func (w *lostWrite) applied(v *jobView) (bool, error) {
	switch {
	case w == nil:
		return false, nil
	case w.value == nil && v.job == nil:
		return true, nil
	case w.value != nil && v.job != nil && v.jobRev > w.at && bytes.Equal(v.jobValue, w.value):
		return true, nil
	case v.jobRev == w.before:
		return false, nil // the job is as the lost attempt read it
	case v.job != nil && v.jobRev <= w.at:
		return false, nil // not written since the lost attempt's read, before which its commit cannot be
	}
	return false, fmt.Errorf("%w (%v); the job is at revision %d", ErrOutcomeUnknown, w.err, v.jobRev)
}

// noJob is ErrNoJob for job name of cluster.
func noJob(name, cluster string) error {
	return fmt.Errorf("%w: %s (cluster %s)", ErrNoJob, name, cluster)
}

// keyValue is a key as etcd answers it, for decodeStoredJob.
func keyValue(key string, value []byte, rev int64) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: []byte(key), Value: value, ModRevision: rev}
}
