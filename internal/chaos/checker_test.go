package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/jobs"
)

// The checker's self-test: a clean history passes, and each kind of bug the
// chaos suite exists to catch makes it fail, with a violation that says so.

const selfTestCatalog = `cluster: selftest
jobs:
  - name: all
    schedule: "@every 1s"
    partitions: 2
    misfire: fire-all
    command: ["true"]
  - name: once
    schedule: "@every 1s"
    misfire: fire-once
    command: ["true"]
`

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

type attemptLog struct {
	seq int64
	as  []Attempt
}

func (h *attemptLog) add(kind Kind, slot string, part int, token fencing.Token, member string, scheduled, at time.Time, out Outcome) {
	h.seq++
	h.as = append(h.as, Attempt{Seq: h.seq, At: at, Kind: kind, Job: slot, Partition: part, Member: member, Token: token,
		ExecutionID: jobs.ExecutionID(slot, part, scheduled), Scheduled: scheduled, Outcome: out})
}

// clean is 10 s of every slot firing on time, member a with token 10 for the
// first 5 s, then member b (token 20) after raising the fence.
func clean() *attemptLog {
	h := &attemptLog{}
	slots := []struct {
		job  string
		part int
	}{{"all", 0}, {"all", 1}, {"once", 0}}
	for _, s := range slots {
		h.add(Raise, s.job, s.part, 10, "a", time.Time{}, t0.Add(-time.Second), Accepted)
	}
	for i := 0; i < 10; i++ {
		at := t0.Add(time.Duration(i) * time.Second)
		for _, s := range slots {
			tok, m := fencing.Token(10), "a"
			if i >= 5 {
				tok, m = 20, "b"
				if i == 5 {
					h.add(Raise, s.job, s.part, tok, m, time.Time{}, at, Accepted)
				}
			}
			h.add(Write, s.job, s.part, tok, m, at, at.Add(5*time.Millisecond), Accepted)
		}
	}
	return h
}

func spec(t *testing.T, faults ...Fault) Spec {
	t.Helper()
	cat, err := config.Parse("selftest.yaml", []byte(selfTestCatalog))
	if err != nil {
		t.Fatal(err)
	}
	return Spec{Catalog: cat, From: t0, To: t0.Add(10 * time.Second), Faults: faults, OnTime: 500 * time.Millisecond, Recovery: 5 * time.Second}
}

func expectViolation(t *testing.T, rep Report, want string) {
	t.Helper()
	if rep.OK() {
		t.Fatalf("checker passed a attemptLog it must fail (%s)", want)
	}
	for _, v := range rep.Violations {
		if strings.Contains(v, want) {
			return
		}
	}
	t.Fatalf("no violation mentions %q: %q", want, rep.Violations)
}

func TestCheckerPassesCleanHistory(t *testing.T) {
	rep := Check(clean().as, spec(t))
	if !rep.OK() || rep.Expected != 30 || rep.Accepted != 30 || rep.Missed != 0 {
		t.Fatalf("clean history: %+v", rep)
	}
}

func TestCheckerCatchesDuplicate(t *testing.T) {
	h := clean()
	// After failover, b runs a fire that a had already run, under a new id
	// (as a scheduler that forgot the execution id's determinism would).
	at := t0.Add(4 * time.Second)
	h.seq++
	h.as = append(h.as, Attempt{Seq: h.seq, At: at.Add(2 * time.Second), Kind: Write, Job: "all", Partition: 1, Member: "b", Token: 20,
		ExecutionID: "other-id", Scheduled: at, Outcome: Accepted})
	rep := Check(h.as, spec(t))
	if rep.Duplicates != 1 {
		t.Fatalf("duplicates = %d; want 1", rep.Duplicates)
	}
	expectViolation(t, rep, "accepted 2 times")
}

func TestCheckerCatchesStaleAcceptedWrite(t *testing.T) {
	h := clean()
	// The paused ex-leader a wakes and its write lands after b's, and the
	// resource (wrongly) took it.
	h.add(Write, "all", 0, 10, "a", t0.Add(10*time.Second), t0.Add(10*time.Second), Accepted)
	expectViolation(t, Check(h.as, spec(t)), "stale write accepted")
	// The same write rejected is what must happen, and passes.
	h.as[len(h.as)-1].Outcome = Stale
	if rep := Check(h.as, spec(t)); !rep.OK() || rep.Stale != 1 {
		t.Fatalf("rejected stale write: %+v", rep)
	}
}

func TestCheckerCatchesMissedFires(t *testing.T) {
	drop := func(h *attemptLog, job string, at time.Time) {
		var kept []Attempt
		for _, a := range h.as {
			if !(a.Kind == Write && a.Job == job && a.Scheduled.Equal(at)) {
				kept = append(kept, a)
			}
		}
		h.as = kept
	}
	fault := Fault{Name: "kill", Start: t0.Add(3 * time.Second), Heal: t0.Add(3 * time.Second), MayDrop: 2 * time.Second}

	// fire-once may drop inside the fault's window ...
	h := clean()
	drop(h, "once", t0.Add(4*time.Second))
	rep := Check(h.as, spec(t, fault))
	if !rep.OK() || rep.Dropped[config.MisfireFireOnce] != 1 || rep.Missed != 1 {
		t.Fatalf("drop allowed by fire-once: %+v", rep)
	}
	// ... but not outside it,
	h = clean()
	drop(h, "once", t0.Add(8*time.Second))
	expectViolation(t, Check(h.as, spec(t, fault)), "outside every fault's window")
	// and fire-all never drops.
	h = clean()
	drop(h, "all", t0.Add(4*time.Second))
	expectViolation(t, Check(h.as, spec(t, fault)), "fire-all drops nothing")
}

// A fire-all fire that a skip record of the overlap policy accounts for
// (its Repeats included) was not dropped: the policy skipped it while a run
// went on. A skip for any other reason, or of another slot, excuses nothing.
func TestOverlapSkipsAreNotDrops(t *testing.T) {
	h := clean()
	var kept []Attempt
	for _, a := range h.as {
		if !(a.Kind == Write && a.Job == "all" && a.Partition == 0 && a.Scheduled.After(t0.Add(5*time.Second)) && a.Scheduled.Before(t0.Add(8*time.Second))) {
			kept = append(kept, a)
		}
	}
	h.as = kept // all/0's fires at 6 s and 7 s never ran
	skip := func(part int, reason string) RecordWrite {
		last := t0.Add(7 * time.Second)
		return RecordWrite{Revision: 40, Record: history.Record{Job: "all", Partition: part, ScheduledTime: t0.Add(6 * time.Second),
			Outcome: history.OutcomeSkipped, Error: reason, Repeats: 1, LastScheduledTime: &last}}
	}
	s := spec(t)
	s.Records = []RecordWrite{skip(0, history.SkippedRunning)}
	if rep := Check(h.as, s); !rep.OK() || rep.Overlapped != 2 || rep.Missed != 2 {
		t.Fatalf("fires skipped while a run went on: %+v", rep)
	}
	for _, r := range []RecordWrite{skip(0, "paused"), skip(1, history.SkippedRunning)} {
		s.Records = []RecordWrite{r}
		rep := Check(h.as, s)
		if rep.Overlapped != 0 {
			t.Errorf("%s/%d skipped (%s) excused all/0's fires: %+v", r.Record.Job, r.Record.Partition, r.Record.Error, rep)
		}
		expectViolation(t, rep, "all/0: scheduled 2026-11-30T12:00:06Z never accepted (misfire fire-all drops nothing)")
	}
}

func TestCheckerCatchesFiresFromBeforeTheCatalog(t *testing.T) {
	h := clean()
	// A new owner "catching up" fires from before the job existed.
	h.add(Write, "all", 0, 20, "b", t0.Add(-time.Minute), t0.Add(6*time.Second), Accepted)
	s := spec(t)
	s.Born = t0.Add(-2 * time.Second)
	expectViolation(t, Check(h.as, s), "before the catalog existed")
}

func TestCheckerMeasuresRecovery(t *testing.T) {
	fault := Fault{Name: "kill", Start: t0.Add(3 * time.Second), Heal: t0.Add(3 * time.Second)}
	h := clean()
	// Fires from 3 s to 6 s accepted late, at 6.2 s (a catch-up).
	for i := range h.as {
		a := &h.as[i]
		if a.Kind == Write && a.Job == "all" && !a.Scheduled.Before(t0.Add(3*time.Second)) && !a.Scheduled.After(t0.Add(6*time.Second)) {
			a.At = t0.Add(6200 * time.Millisecond)
		}
	}
	rep := Check(h.as, spec(t, fault))
	if !rep.OK() || rep.Recovered["kill"] != 3200*time.Millisecond {
		t.Fatalf("recovery: %v, violations %q", rep.Recovered, rep.Violations)
	}
	s := spec(t, fault)
	s.Recovery = 3 * time.Second
	expectViolation(t, Check(h.as, s), "back at full speed 3.2s after it healed")
}

// A replay is allowed only for the in-doubt fire: a's run at 4 s, its member
// then killed, run again once by b under its new token. The same replay
// after a graceful stop, with no fault, by the holder that ran it, or twice
// under b's token is forbidden, and counted.
func TestReplaysAreJudged(t *testing.T) {
	scheduled := t0.Add(4 * time.Second)
	replayed := func(token fencing.Token, member string, times int) *attemptLog {
		h := clean()
		for i := 0; i < times; i++ {
			h.add(Write, "all", 0, token, member, scheduled, t0.Add(time.Duration(5500+100*i)*time.Millisecond), Replay)
		}
		return h
	}
	kill := Fault{Name: "kill", Start: t0.Add(4100 * time.Millisecond), Heal: t0.Add(4100 * time.Millisecond), MayDrop: time.Second, InDoubt: []string{"a"}}
	if rep := Check(replayed(20, "b", 1).as, spec(t, kill)); !rep.OK() || rep.Replays != 1 || rep.Forbidden != 0 {
		t.Fatalf("the in-doubt fire of a killed member, run again once by the next holder: %+v", rep)
	}
	quorum := Fault{Name: "quorum", Start: t0.Add(3 * time.Second), Heal: t0.Add(5 * time.Second), EveryMember: true}
	if rep := Check(replayed(20, "b", 1).as, spec(t, quorum)); !rep.OK() || rep.Forbidden != 0 {
		t.Fatalf("the in-doubt fire after a quorum loss: %+v", rep)
	}
	graceful := Fault{Name: "restart", Start: t0.Add(4100 * time.Millisecond), Heal: t0.Add(5 * time.Second)}
	for _, c := range []struct {
		name  string
		h     *attemptLog
		fault Fault
		want  string
	}{
		{"after a graceful stop", replayed(20, "b", 1), graceful, "no fault killed, paused or cut off a"},
		{"with no fault", replayed(20, "b", 1), Fault{Name: "none"}, "no fault killed, paused or cut off a"},
		{"a member that is not the one killed", replayed(20, "b", 1), Fault{Name: "kill c", Start: kill.Start, Heal: kill.Heal, InDoubt: []string{"c"}}, "no fault killed"},
		{"by the holder that ran it", replayed(10, "a", 1), kill, "by the holder that had run it"},
		{"twice by one new holder", replayed(20, "b", 2), kill, "run again 2 times under token 20"},
	} {
		rep := Check(c.h.as, spec(t, c.fault))
		if rep.Forbidden != 1 {
			t.Errorf("%s: %d forbidden replays; want 1 (%q)", c.name, rep.Forbidden, rep.Violations)
			continue
		}
		expectViolation(t, rep, c.want)
	}
}

// judgeStates: a fire started again (attempt 2) after a state key recorded
// its success is forbidden, whatever the faults; started again when no
// state recorded its result (the in-doubt fire), it is not.
func TestStartAfterARecordedSuccessIsForbidden(t *testing.T) {
	at := t0.Add(4 * time.Second)
	id := jobs.ExecutionID("all", 0, at)
	started := StateWrite{Slot: "all/0", Revision: 10, State: slotState(at, 1, at.Add(-time.Second), id)}
	finished := StateWrite{Slot: "all/0", Revision: 11, State: slotState(at, 1, at, id)}
	again := StateWrite{Slot: "all/0", Revision: 12, State: slotState(at, 2, at.Add(-time.Second), id)}
	s := spec(t)
	s.States = []StateWrite{started, again}
	if rep := Check(clean().as, s); !rep.OK() || rep.Forbidden != 0 {
		t.Fatalf("the in-doubt fire started again: %+v", rep)
	}
	s.States = []StateWrite{started, finished, again}
	rep := Check(clean().as, s)
	if rep.Forbidden != 1 {
		t.Fatalf("%d forbidden replays; want 1 (%q)", rep.Forbidden, rep.Violations)
	}
	expectViolation(t, rep, "attempt 2 started at revision 12")
}

func slotState(started time.Time, attempt int, finished time.Time, id string) history.SlotState {
	return history.SlotState{Started: started, StartedAttempt: attempt, StartedID: id, Finished: finished, Outcome: string(jobs.Succeeded)}
}
