package fenced

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/shard"
)

// BenchmarkJournalIndex fills a writer's journal index as a member of the
// soak does (333 slots firing every second, 111 records a transaction,
// keeping 50) and prints the heap it holds per record of the full journal:
// what a member's memory grows by while its journal fills.
func BenchmarkJournalIndex(b *testing.B) {
	const slots, perEntry, limit = 333, 111, 50
	var claims []fencing.Claim
	for i := range slots {
		claims = append(claims, fencing.Claim{LeaderKey: fmt.Sprintf("/kira/c/election/bench/%d/694d9a2b1c3e4f5a", i), Token: fencing.Token(1000 + i)})
	}
	b.ReportAllocs()
	for range b.N {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		j := newIndex("c", "m", DefaultJournalEntries)
		seq, next := make([]int64, slots), 0
		for batch := range int64(2 * DefaultJournalEntries) {
			ws := make([]Write, 0, perEntry)
			for range perEntry {
				s := next % slots
				next++
				r := journalRecord(shard.Slot{Job: "bench", Partition: s}, seq[s], limit)
				seq[s]++
				ws = append(ws, Write{Claim: claims[s], Records: []Record{r}})
			}
			p := j.take(ws, nil) // no handovers
			p.committed(ws, batch)
			j.landed(p)
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(DefaultJournalEntries*perEntry), "heap-B/record")
		runtime.KeepAlive(j)
	}
}
