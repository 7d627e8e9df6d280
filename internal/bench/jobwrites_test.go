package bench

import (
	"testing"

	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/shard"
)

// A created job whose first record (sequence 0) is no longer among its
// records, in its ring or in a journal, had it overwritten by a newer one:
// its first fire cannot be read, and the bench says so rather than take
// its oldest record left for its first.
func TestFirstRecordOverwrittenIsCounted(t *testing.T) {
	rec := func(job string, seq int64) history.Slotted {
		return history.Slotted{Slot: shard.Slot{Job: job}, Stored: history.Stored{Seq: &seq}}
	}
	got := overwritten([]history.Slotted{rec("kept", 2), rec("kept", 0), rec("lost", 3), rec("lost", 1), rec("newer only", 5)})
	got2 := overwritten([]history.Slotted{{Slot: shard.Slot{Job: "old format"}}})
	if !got["lost"] || got["kept"] || !got["newer only"] || len(got) != 2 || len(got2) != 0 {
		t.Fatalf("overwritten = %v and %v; want only lost and newer only, and none for records without a sequence", got, got2)
	}
}
