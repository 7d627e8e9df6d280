package config

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// JobWriter writes single jobs of one cluster's stored catalog, as PutJob
// and DeleteJob do, keeping between writes what it last read or wrote:
// catalog-head and the settings with their mod revisions, the jobs it
// read or wrote lately, and a bound of the generation's jobs (jobcount.go).
// A write decides on what it keeps and commits at once, guarded on all of
// it as a write that read it would be, the job's key guarded as kept
// (absent, when not kept); a failed guard answers, in the same
// transaction, catalog-head, the settings and the job as stored, and the
// write decides again on those. So a create costs etcd one request in the
// common case and a conflict one more, never a wrong write
// (TestJobWriterCreatesInOneRequest, TestJobWriterStaleCache).
//
// Only a committed transaction takes what the writer kept as true: every
// answer that writes nothing (a refusal, a precondition, an unchanged job)
// is decided on what this write read from etcd, so a stale cache costs a
// request, never a wrong answer; a refusal at MaxJobs is decided on a
// bound of the jobs that may be too high by other writers' deletes of the
// last second (jobcount.go). Safe for concurrent use
// (TestJobWriterConcurrentCreates); the API's server holds one, and the
// package functions use a new one for each call.
type JobWriter struct {
	kv      clientv3.KV
	cluster string
	// maxJobs is MaxJobs and recount how long a count of the generation's
	// jobs, or what it learned of catalog-head's version, is kept when it
	// matters (jobcount.go); tests lower them.
	maxJobs int64
	recount time.Duration

	mu   sync.Mutex // guards the fields below
	base *jobBase
	jobs map[string]keptJob
	n    keptCount
	seen int64 // the highest etcd revision answered to this writer
}

// jobBase is catalog-head and the settings as last read, at revision at.
type jobBase struct {
	headValue []byte
	head      head
	headRev   int64
	sets      storedSettings
	setsRev   int64
	at        int64
}

// keptJob is a job's key as read or written at revision at: its value
// (nil: absent) and mod revision.
type keptJob struct {
	value   []byte
	rev, at int64
}

const (
	// maxKeptJobs bounds the jobs a JobWriter keeps, and maxKeptJobBytes
	// the size of each: at most 16 MiB, for about 4,000 jobs a member's
	// API writes in turn (a job of one line is about 300 bytes).
	maxKeptJobs     = 4096
	maxKeptJobBytes = 4096
	// recountEvery is how long a JobWriter keeps a count of the jobs at
	// the limit, and what it learned of catalog-head's version.
	recountEvery = time.Second
)

// NewJobWriter returns a writer of single jobs of cluster's catalog in kv.
func NewJobWriter(kv clientv3.KV, cluster string) *JobWriter {
	return &JobWriter{kv: kv, cluster: cluster, maxJobs: MaxJobs, recount: recountEvery, jobs: map[string]keptJob{}}
}

// GetJob is GetJob of the writer's cluster; what it reads is kept, so
// that a write of the job after it costs one request.
func (w *JobWriter) GetJob(ctx context.Context, name string) (*StoredJob, error) {
	v, err := w.read(ctx, name)
	if err != nil {
		return nil, err
	}
	if v.job == nil {
		return nil, noJob(name, w.cluster)
	}
	return v.stored(), nil
}

// read reads job name and what a write decides on from etcd, in one
// request while the generation is the one kept, and keeps it.
func (w *JobWriter) read(ctx context.Context, name string) (*jobView, error) {
	w.mu.Lock()
	gen := int64(0)
	if w.base != nil {
		gen = w.base.head.Generation
	}
	w.mu.Unlock()
	v, err := readJobView(ctx, w.kv, w.cluster, name, gen)
	if err == nil {
		w.learn(v)
	}
	return v, err
}

// kept is the view of job name from what the writer keeps; nil when it
// keeps no catalog-head, or the job as kept no longer decodes.
func (w *JobWriter) kept(name string) *jobView {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.base
	if b == nil {
		return nil
	}
	v := &jobView{cluster: w.cluster, name: name, headValue: b.headValue, head: b.head, headRev: b.headRev,
		at: w.seen, sets: b.sets, setsRev: b.setsRev}
	if k, ok := w.jobs[name]; ok && k.value != nil {
		sj, err := decodeStoredJob(keyValue(v.key(), k.value, k.rev), name, b.sets)
		if err != nil {
			return nil
		}
		v.job, v.jobValue, v.jobRev = sj, k.value, k.rev
	}
	return v
}

// learn keeps what the fresh view v read, unless the writer keeps newer.
func (w *JobWriter) learn(v *jobView) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = max(w.seen, v.at)
	w.n.learn(v.head.Generation, v.headVer, v.srcRev)
	if w.base == nil || v.at > w.base.at {
		if w.base != nil && w.base.head.Generation != v.head.Generation {
			clear(w.jobs)
		}
		w.base = &jobBase{headValue: v.headValue, head: v.head, headRev: v.headRev, sets: v.sets, setsRev: v.setsRev, at: v.at}
	}
	if w.base.head.Generation == v.head.Generation {
		w.keep(v.name, v.jobValue, v.jobRev, v.at)
	}
}

// wrote keeps what a committed write of v's job did, resp its answer:
// catalog-head put again (the settings and generation as v's, guarded),
// the job's new value (nil: deleted), and the count (jobcount.go).
func (w *JobWriter) wrote(v *jobView, value []byte, resp *clientv3.TxnResponse) {
	rev := resp.Header.Revision
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = max(w.seen, rev)
	if w.base != nil && w.base.head.Generation == v.head.Generation && rev > w.base.at {
		b := *w.base
		b.headRev, b.at = rev, rev
		if b.setsRev != v.setsRev {
			b.sets, b.setsRev = v.sets, v.setsRev
		}
		w.base = &b
	}
	if w.base != nil && w.base.head.Generation == v.head.Generation {
		w.keep(v.name, value, rev, rev)
	}
	d := int64(0)
	switch {
	case v.job == nil && value != nil:
		d = 1
	case v.job != nil && value == nil:
		d = -1
	}
	w.n.wrote(v.head.Generation, rev, d, headBefore(resp))
}

// keep records job name's key at revision at (w.mu held): a value too
// large to keep is forgotten, and when the writer keeps maxKeptJobs jobs
// it forgets one.
func (w *JobWriter) keep(name string, value []byte, rev, at int64) {
	if k, ok := w.jobs[name]; ok && k.at >= at {
		return
	}
	if len(value) > maxKeptJobBytes {
		delete(w.jobs, name)
		return
	}
	if _, ok := w.jobs[name]; !ok && len(w.jobs) >= maxKeptJobs {
		for other := range w.jobs {
			delete(w.jobs, other)
			break
		}
	}
	w.jobs[name] = keptJob{value: value, rev: rev, at: at}
}
