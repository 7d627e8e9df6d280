package fenced

import (
	"slices"

	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// placeState moves the slot state that fw's records carry (a record holds
// its slot's state as of its write) into a put of each slot's state key,
// committed in fw's transaction under its claim, and strips the states from
// the records: a journal entry, which the writer reuses in turn, and the
// copies made from it hold history only. So a slot's correctness state is
// only ever in its state key, which nothing but a newer fenced write of the
// slot overwrites: an entry reused, a copy of an older record, or a commit
// whose answer was lost costs history, never state. A write whose Ops put
// the state key themselves keeps theirs. The state key is encoded in format
// (history.EncodeState; Writer.SetStateFormat). Held by
// TestAnAppliedWriteAnsweredWithAnErrorKeepsItsState and
// TestJournalEntriesHoldNoState.
func (j *journalIndex) placeState(fw *Write, format int) {
	fw.state = nil
	if !slices.ContainsFunc(fw.Records, func(r Record) bool { return r.Stored.State != nil }) {
		return
	}
	written := map[string]bool{}
	for _, op := range fw.Ops {
		written[string(op.KeyBytes())] = true
	}
	records := slices.Clone(fw.Records)
	newest := map[shard.Slot]int{} // by slot, its last record with a state
	var order []shard.Slot
	for i, r := range records {
		if r.Stored.State == nil {
			continue
		}
		if _, ok := newest[r.Slot]; !ok {
			order = append(order, r.Slot)
		}
		newest[r.Slot] = i
	}
	for _, s := range order {
		key := keyspace.State(j.cluster, s)
		if written[key] {
			continue
		}
		data := history.EncodeState(s, *records[newest[s]].Stored.State, format)
		fw.state = append(fw.state, clientv3.OpPut(key, string(data)))
	}
	for i := range records {
		records[i].Stored.State = nil
	}
	fw.Records = records
}

// SetStateFormat sets the format of the state keys the writer puts for
// records (placeState): the newest every member of the view reads
// (member.View.HistoryFormat); JSON until it is set.
func (w *Writer) SetStateFormat(format int) { w.stateFormat.Store(int32(format)) }
