package scheduler

import (
	"context"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// What happens to the journal of a member that has left. Nobody writes it
// any more (its claims went with its lease), and each slot with records in
// it is taken over by a member that copies what it needs to the slot's
// ring and writes the slot's state key (takeoverWrite). Once every such
// slot's state key names a newer token than the journal's records, the
// journal holds nothing a reader needs, and any member deletes it. A
// journal holds history only (a slot's state is in its state key), so a
// slot no job of the catalog has does not keep it; a record of an earlier
// version that carries its slot's state does, whatever the catalog.
// Held by TestJournalOfALeftMemberIsDeletedOnceItsSlotsAreTaken.

// DefaultJournalSweep is how often a member looks for journals of members
// that have left.
const DefaultJournalSweep = time.Minute

// sweepJournals deletes, every sweep, the journals no reader needs; it
// stops with ctx.
func (s *Scheduler) sweepJournals(ctx context.Context, every time.Duration) {
	defer s.wg.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := s.sweepOnce(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Debug("could not sweep the journals of members that left", "err", err)
		}
	}
}

// sweepOnce deletes the journals of members that have left whose slots
// have all been taken over.
func (s *Scheduler) sweepOnce(ctx context.Context) error {
	cluster := s.member.Cluster()
	keys, err := s.cli.Get(ctx, keyspace.Journals(cluster), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	members := map[string]bool{}
	for _, kv := range keys.Kvs {
		if m, ok := keyspace.ParseJournalEntry(cluster, string(kv.Key)); ok && m != s.member.ID() {
			members[m] = true
		}
	}
	for m := range members {
		gone, read, err := s.journalAbsorbed(ctx, m)
		if err != nil {
			return err
		}
		if !gone {
			continue
		}
		if err := s.deleteJournal(ctx, m, read); err != nil {
			return err
		}
	}
	return nil
}

// deleteJournal deletes member m's journal as sweepOnce read it, at
// revision read: an entry written since (by a member still draining after
// it left the view) keeps the whole journal until a later sweep reads it.
// Held by TestSweepSparesAJournalWrittenSinceItsRead.
func (s *Scheduler) deleteJournal(ctx context.Context, m string, read int64) error {
	prefix := keyspace.Journal(s.member.Cluster(), m)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(prefix), "<", read+1).WithPrefix()).
		Then(clientv3.OpDelete(prefix, clientv3.WithPrefix())).Commit()
	if err == nil && resp.Succeeded {
		s.cfg.Logger.Info("deleted the journal of a member that left", "member", m)
	}
	return err
}

// journalAbsorbed reports whether member m has left and every slot with
// records in its journal, as read at revision read, has a state key written
// by a later holder (or belongs to no job of the catalog, and none of its
// records there carries its state).
func (s *Scheduler) journalAbsorbed(ctx context.Context, m string) (gone bool, read int64, err error) {
	cluster := s.member.Cluster()
	alive, err := s.cli.Get(ctx, keyspace.Member(cluster, m), clientv3.WithCountOnly())
	if err != nil || alive.Count > 0 {
		return false, 0, err // a member still in the view writes its journal: not read
	}
	resp, err := s.cli.Get(ctx, keyspace.Journal(cluster, m), clientv3.WithPrefix())
	if err != nil {
		return false, 0, err
	}
	read = resp.Header.Revision
	newest := map[shard.Slot]fencing.Token{} // the token of each slot's records there
	stateful := map[shard.Slot]bool{}        // a record there carries the slot's state
	for _, kv := range resp.Kvs {
		items, err := history.JournalItems(cluster, kv)
		if err != nil {
			continue
		}
		for _, it := range items {
			newest[it.Slot] = max(newest[it.Slot], it.Stored.Token)
			stateful[it.Slot] = stateful[it.Slot] || it.Stored.State != nil
		}
	}
	var slots []shard.Slot
	for sl := range newest {
		if stateful[sl] || inCatalog(s.Jobs(), sl) {
			slots = append(slots, sl)
		}
	}
	keys := make([]string, len(slots))
	for i, sl := range slots {
		keys[i] = keyspace.State(cluster, sl)
	}
	states, err := journal.GetEach(ctx, s.cli, keys)
	if err != nil {
		return false, 0, err
	}
	for i, kvs := range states {
		if len(kvs) == 0 {
			return false, 0, nil // not taken over yet
		}
		st, err := history.DecodeState(slots[i], kvs[0].Value)
		if err != nil || st.Token <= newest[slots[i]] {
			return false, 0, nil // not taken over yet
		}
	}
	return true, read, nil
}

// inCatalog reports whether slot s is a partition of one of jobs.
func inCatalog(jobs []config.Job, s shard.Slot) bool {
	for _, j := range jobs {
		if j.Name == s.Job {
			return s.Partition < j.Partitions
		}
	}
	return false
}
