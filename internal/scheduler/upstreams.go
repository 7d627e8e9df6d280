package scheduler

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/history/upstream"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The upstream reader: what the holders of dependent slots (after:) know of
// the fires of their upstream jobs. One goroutine per member reads the
// upstream jobs' records, in their rings and in the members' journals, as
// of one revision (journal.Cache.SlotsNow, then the rings at that
// revision, so a record moving from a journal to its ring is seen in one of
// the two), whenever a journal or a ring changes (a watch on both
// prefixes), at most every upstreamPace, and when the loop asks (a dependent
// slot taken over). The loop takes the newest read (upstreamsRead).

// upstreamPace spaces the reads of the upstream records: the watch wakes
// the reader at every write of every member.
const upstreamPace = 100 * time.Millisecond

// upstreamPoll is how often the reader reads anyway: a watch that broke
// and was made again may have missed a write.
const upstreamPoll = 5 * time.Second

// upstreamRead is one read of every upstream job of the catalog.
type upstreamRead struct {
	rev  int64
	jobs map[string]*upstream.Fires
}

// upstreamReader holds the newest read for the loop, and the loop's
// requests for a fresh one.
type upstreamReader struct {
	// leading says this member leads a dependent slot (the loop keeps it):
	// the reader reads only then.
	leading atomic.Bool
	mu      sync.Mutex
	newest  *upstreamRead
	ready   chan struct{} // rung when newest changed
	wake    chan struct{} // rung by the loop: read now
}

func newUpstreamReader() *upstreamReader {
	return &upstreamReader{ready: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
}

// take returns the newest read not taken yet, or nil.
func (r *upstreamReader) take() *upstreamRead {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.newest
	r.newest = nil
	return n
}

// upstreamSpecs are the upstream jobs of the catalog's dependents.
func (s *Scheduler) upstreamSpecs() []config.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	wanted := map[string]bool{}
	for _, j := range s.installed {
		for _, u := range j.spec.After {
			wanted[u.Job] = true
		}
	}
	var out []config.Job
	for _, j := range s.installed {
		if wanted[j.spec.Name] {
			out = append(out, j.spec)
		}
	}
	return out
}

// watchUpstreams is the reader's goroutine; it returns when ctx ends. It
// watches and reads only while this member leads a slot of a dependent: a
// cluster without dependents, and a member without their slots, pay
// nothing.
func (s *Scheduler) watchUpstreams(ctx context.Context) {
	defer s.wg.Done()
	cluster := s.member.Cluster()
	cache := journal.NewCache(s.cli, cluster)
	w := &upstreamWatch{cli: s.cli, cluster: cluster}
	defer w.stop()
	poll := time.NewTicker(upstreamPoll)
	defer poll.Stop()
	dirty := true
	for {
		var specs []config.Job
		if s.upstream.leading.Load() {
			specs = s.upstreamSpecs()
		}
		w.follow(ctx, len(specs) > 0)
		if len(specs) == 0 {
			cache.Clear() // no journal kept in memory while nothing is read
		}
		if dirty && len(specs) > 0 {
			if read, err := readUpstreams(ctx, s.cli, cache, cluster, specs); err != nil {
				cache.Clear()
			} else {
				s.upstream.mu.Lock()
				s.upstream.newest = read
				s.upstream.mu.Unlock()
				ringBell(s.upstream.ready)
				dirty = false
			}
			select { // pace the reads
			case <-ctx.Done():
				return
			case <-time.After(upstreamPace):
			}
		}
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.journals:
			dirty = true
			w.broken(ok)
		case _, ok := <-w.rings:
			dirty = true
			w.broken(ok)
		case <-s.upstream.wake:
			dirty = true
		case <-poll.C:
			dirty = true
		}
	}
}

// upstreamWatch is the reader's watch of the journals and the rings.
type upstreamWatch struct {
	cli             *clientv3.Client
	cluster         string
	cancel          context.CancelFunc // nil: not watching
	journals, rings clientv3.WatchChan
}

// follow watches while on, and stops watching otherwise.
func (w *upstreamWatch) follow(ctx context.Context, on bool) {
	switch {
	case on && w.cancel == nil:
		var wctx context.Context
		wctx, w.cancel = context.WithCancel(clientv3.WithRequireLeader(ctx))
		w.journals = w.cli.Watch(wctx, keyspace.Journals(w.cluster), clientv3.WithPrefix())
		w.rings = w.cli.Watch(wctx, keyspace.Cluster(w.cluster)+"history/", clientv3.WithPrefix())
	case !on:
		w.stop()
	}
}

// broken stops a watch that ended (no etcd leader, compaction, …): the
// next follow after a pause makes it again.
func (w *upstreamWatch) broken(ok bool) {
	if !ok {
		w.stop()
		time.Sleep(upstreamPace) // a watch that ends at once is not made again in a spin
	}
}

func (w *upstreamWatch) stop() {
	if w.cancel != nil {
		w.cancel()
	}
	w.cancel, w.journals, w.rings = nil, nil, nil
}

// readUpstreams reads the records of specs' slots as of one revision.
func readUpstreams(ctx context.Context, kv clientv3.KV, cache *journal.Cache, cluster string, specs []config.Job) (*upstreamRead, error) {
	var slots []shard.Slot
	for _, j := range specs {
		for p := 0; p < j.Partitions; p++ {
			slots = append(slots, shard.Slot{Job: j.Name, Partition: p})
		}
	}
	inJournals, rev, err := cache.SlotsNow(ctx, slots)
	if err != nil {
		return nil, err
	}
	var journaled, ring []history.Slotted
	for _, s := range slots {
		journaled = append(journaled, inJournals[s]...)
	}
	for _, j := range specs {
		resp, err := kv.Get(ctx, keyspace.History(cluster, j.Name), clientv3.WithPrefix(), clientv3.WithRev(rev))
		if err != nil {
			return nil, err
		}
		for _, e := range resp.Kvs {
			s, ok := keyspace.ParseHistoryEntry(cluster, string(e.Key))
			if !ok || s.Job != j.Name {
				continue
			}
			if st, err := history.Decode(s, e.Value); err == nil {
				ring = append(ring, history.Slotted{Slot: s, Stored: st, Revision: e.ModRevision})
			}
		}
	}
	read := &upstreamRead{rev: rev, jobs: map[string]*upstream.Fires{}}
	for _, j := range specs {
		read.jobs[j.Name] = upstream.NewFires(j)
	}
	for _, r := range history.Gather(ring, journaled) {
		if f := read.jobs[r.Job]; f != nil {
			f.Add(r)
		}
	}
	for _, f := range read.jobs {
		f.Sort()
	}
	return read, nil
}
