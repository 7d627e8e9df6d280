package ops

import (
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/member"
)

// Health names each problem and what to do: slots without a leader, a
// member on another catalog revision, a job placed on no member; nothing
// for a healthy cluster.
func TestHealthNamesWhatToDo(t *testing.T) {
	healthy := &Status{CatalogRevision: 7, Members: []member.Record{{ID: "m1", Name: "one", CatalogRevision: 7}},
		Slots: []SlotStatus{{Job: "a", Owner: "m1", Token: 9}}}
	if p := Health(healthy); len(p) != 0 {
		t.Fatalf("healthy cluster: %+v", p)
	}
	sick := &Status{CatalogRevision: 7, Members: []member.Record{{ID: "m1", Name: "one", CatalogRevision: 7}, {ID: "m2", CatalogRevision: 5}},
		Slots: []SlotStatus{{Job: "a", Owner: "m1", Token: 9}, {Job: "a", Partition: 1}, {Job: "gpu"}}, Unplaced: []string{"gpu"}}
	p := Health(sick)
	if len(p) != 3 {
		t.Fatalf("problems %+v", p)
	}
	for i, want := range []struct{ kind, says string }{
		{"leaderless", "1 slot(s) without a leader (a/1)"},
		{"catalog_revision", "m2 runs 5"},
		{"unplaced", "job gpu is placed on no member"},
	} {
		if p[i].Kind != want.kind || !strings.Contains(p[i].Message, want.says) {
			t.Errorf("problem %d = %+v, want %s saying %q", i, p[i], want.kind, want.says)
		}
	}
}

// A slot's holders are the runs of its records by one member and token;
// a fenced record is no holding; the holder that still leads reaches the
// window's end.
func TestHoldersFromRecords(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(i int, member string, token int64, outcome string) history.Record {
		at := t0.Add(time.Duration(i) * time.Second)
		return history.Record{Member: member, Token: fencing.Token(token), ScheduledTime: at, StartedAt: at.Add(10 * time.Millisecond), FinishedAt: at.Add(20 * time.Millisecond), Outcome: outcome}
	}
	recs := []history.Record{rec(3, "b", 20, "succeeded"), rec(0, "a", 10, "succeeded"), rec(1, "a", 10, "succeeded"), rec(2, "a", 10, "fenced")}
	q := TimelineQuery{From: t0, To: t0.Add(time.Minute), Bucket: time.Second}
	s := slotTimeline(0, SlotStatus{Owner: "b", Token: 20}, recs, q)
	if len(s.Executions) != 4 || s.Executions[2].Outcome != "fenced" || s.Executions[0].LatenessMS != 10 || s.Executions[0].DurationMS != 10 {
		t.Fatalf("executions %+v", s.Executions)
	}
	want := []Holding{{Member: "a", Token: 10, From: t0.Add(10 * time.Millisecond), To: t0.Add(time.Second + 20*time.Millisecond)},
		{Member: "b", Token: 20, From: t0.Add(3*time.Second + 10*time.Millisecond), To: q.To}}
	if len(s.Holders) != 2 || s.Holders[0] != want[0] || s.Holders[1] != want[1] {
		t.Fatalf("holders %+v, want %+v", s.Holders, want)
	}
	buckets := map[int64]*Bucket{}
	addToBuckets(buckets, s, q)
	if b := buckets[3]; b == nil || b.HolderChanges != 1 || b.Outcomes["succeeded"] != 1 {
		t.Fatalf("bucket of the change: %+v", b)
	}
}

// A raised etcd alarm is a line that names it and says what to do.
func TestAlarmProblems(t *testing.T) {
	if p := AlarmProblems(nil); len(p) != 0 {
		t.Fatalf("no alarm: %+v", p)
	}
	p := AlarmProblems([]string{"NOSPACE", "CORRUPT"})
	if len(p) != 2 || p[0].Kind != "etcd_alarm" || !strings.Contains(p[0].Message, "NOSPACE alarm") || !strings.Contains(p[0].Message, "etcdctl alarm disarm") ||
		!strings.Contains(p[0].Message, "defrag") || !strings.Contains(p[1].Message, "snapshot") {
		t.Fatalf("problems %+v", p)
	}
}
