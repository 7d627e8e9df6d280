package scheduler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

type deletedKey struct {
	key string
	rev int64 // the revision of the delete
}

// createdKey is one of our candidacy keys being created.
type createdKey struct {
	slot shard.Slot
	key  string
	rev  int64 // its create revision
}

// watchElections reports deletions of election keys, so a member learns at
// once when its key vanishes behind its back, and deletes keys no member
// wrote (see deleteJunkCandidacy).
func (s *Scheduler) watchElections(ctx context.Context) {
	defer s.wg.Done()
	prefix := keyspace.Elections(s.member.Cluster())
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		opts := []clientv3.OpOption{clientv3.WithPrefix()}
		if rev := s.sweepJunkCandidacies(wctx, prefix); rev > 0 {
			opts = append(opts, clientv3.WithRev(rev+1))
		}
		for wr := range s.cli.Watch(wctx, prefix, opts...) {
			for _, ev := range wr.Events {
				s.electionEvent(ctx, ev)
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// electionEvent hands the loop a deletion or a creation of one of this
// member's candidacy keys.
func (s *Scheduler) electionEvent(ctx context.Context, ev *clientv3.Event) {
	key := string(ev.Kv.Key)
	if ev.Type != mvccpb.DELETE && ev.Kv.Lease == 0 {
		s.deleteJunkCandidacy(ctx, key, ev.Kv.CreateRevision)
		return
	}
	if !strings.HasSuffix(key, fmt.Sprintf("/%x", s.member.Lease())) {
		return
	}
	switch {
	case ev.Type == mvccpb.DELETE:
		select {
		case s.deleted <- deletedKey{key: key, rev: ev.Kv.ModRevision}:
		case <-ctx.Done():
		}
	case ev.Kv.CreateRevision == ev.Kv.ModRevision:
		id, _, ok := keyspace.ParseCandidacy(s.member.Cluster(), key)
		if !ok {
			return
		}
		select {
		case s.created <- createdKey{slot: id, key: key, rev: ev.Kv.CreateRevision}:
		case <-ctx.Done():
		}
	}
}

// sweepJunkCandidacies deletes the election keys without a lease that exist
// when the watch starts, and returns the revision it read at (0 if it could
// not read).
func (s *Scheduler) sweepJunkCandidacies(ctx context.Context, prefix string) int64 {
	// Not WithKeysOnly: etcd answers that from its index, without the lease.
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return 0
	}
	for _, kv := range resp.Kvs {
		if kv.Lease == 0 {
			s.deleteJunkCandidacy(ctx, string(kv.Key), kv.CreateRevision)
		}
	}
	return resp.Header.Revision
}

// deleteJunkCandidacy deletes an election key without a lease. Every
// candidacy is written under its member's lease, so such a key was written
// by hand; left, it would be the oldest of its election forever and hold
// the slot from every member. The delete is conditional on the key's create
// revision. Held by TestJunkInEtcdLeavesEverySlotFiring.
func (s *Scheduler) deleteJunkCandidacy(ctx context.Context, key string, rev int64) {
	s.cfg.Logger.Warn("deleting an election key without a lease (not written by a member)", "key", key)
	ctx, cancel := context.WithTimeout(ctx, resignTimeout)
	defer cancel()
	_, _ = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).Then(clientv3.OpDelete(key)).Commit()
}

// ownKeyCreated deletes a candidacy key of ours that no campaign of ours
// owns. A cancelled campaign's create can reach etcd after the delete that
// withdrew it (the two requests race once the first is cancelled); the
// orphan would be the oldest key of the slot's election, so the preferred
// member would wait behind it for as long as this member lives.
// Held by TestOrphanedCandidacyKeyIsDeleted. The delete is conditional on the
// key's create revision, so it cannot remove a key a newer campaign made.
// The key a slot is resigning is not an orphan, however late its event: its
// resign deletes it after the slot's queued records, with its last state
// (TestLateCreateEventLeavesAResigningKeyToItsResign).
func (s *Scheduler) ownKeyCreated(c createdKey) {
	sl, ok := s.slots[c.slot]
	if ok && (sl.phase == campaigning || sl.held() || sl.phase == resigning && sl.resignRev == c.rev) {
		return
	}
	s.cfg.Logger.Warn("deleting a candidacy key no campaign of ours owns", "slot", c.slot.String(), "revision", c.rev)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.cleanupCtx, resignTimeout)
		defer cancel()
		_, _ = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev)).Then(clientv3.OpDelete(c.key)).Commit()
	}()
}

// controlEvent is one change of a control key.
type controlEvent struct {
	key       string
	value     []byte
	createRev int64
	deleted   bool
}

// watchControl feeds the loop every control key, then every change.
func (s *Scheduler) watchControl(ctx context.Context) {
	defer s.wg.Done()
	prefix := keyspace.Control(s.member.Cluster())
	send := func(evs []controlEvent) bool {
		select {
		case s.control <- evs:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for ctx.Err() == nil {
		resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err == nil {
			evs := []controlEvent{{key: prefix, deleted: true}} // a fresh list replaces what was known
			for _, kv := range resp.Kvs {
				evs = append(evs, controlEvent{key: string(kv.Key), value: kv.Value, createRev: kv.CreateRevision})
			}
			if !send(evs) {
				return
			}
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			for wr := range s.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
				if wr.Err() != nil {
					break
				}
				var evs []controlEvent
				for _, ev := range wr.Events {
					evs = append(evs, controlEvent{key: string(ev.Kv.Key), value: ev.Kv.Value, createRev: ev.Kv.CreateRevision, deleted: ev.Type == mvccpb.DELETE})
				}
				if len(evs) > 0 && !send(evs) {
					cancel()
					return
				}
			}
			cancel()
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
