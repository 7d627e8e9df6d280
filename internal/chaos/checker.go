package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/jobs"
)

type key struct {
	slot string
	at   int64 // scheduled, Unix ns
}

// Fault is one injected fault, as the checker needs to know it.
type Fault struct {
	Name string
	// Start is when the fault was injected, Heal when it was undone (equal
	// to Start for a fault with no duration, such as kill -9).
	Start, Heal time.Time
	// MayDrop is how long after Start a job whose misfire policy drops
	// missed fires (fire-once, skip) may have dropped some: the outage the
	// fault can cause. Zero means the fault may drop nothing.
	MayDrop time.Duration
	// InDoubt names the members (by id) the fault killed, paused or cut
	// off: a fire one of them ran may have its result unrecorded, and its
	// next holder may run it again (a replay). EveryMember says the fault
	// could do that to every member (etcd lost quorum or its leader). A
	// graceful stop puts nobody in doubt: after it, a replay is forbidden.
	InDoubt     []string
	EveryMember bool
}

// putsInDoubt reports whether f could have left member's fire, accepted at
// ran, in doubt until it ran again at again.
func (f Fault) putsInDoubt(member string, ran, again time.Time, slack time.Duration) bool {
	if !f.EveryMember && !slices.Contains(f.InDoubt, member) {
		return false
	}
	return !f.Start.After(again) && !f.Heal.Add(f.MayDrop+slack).Before(ran)
}

// Spec is what the checker holds a history to.
type Spec struct {
	Catalog *config.Catalog
	// Every scheduled time in [From, To) must be accounted for.
	From, To time.Time
	// Born is when the catalog was first stored: a fire scheduled before
	// it is nobody's to run, and accepting one is a bug (zero: no check).
	Born   time.Time
	Faults []Fault
	// OnTime is how late a write may be accepted after its scheduled time
	// and still count as on time.
	OnTime time.Duration
	// Work is, per job, how long an execution works before it writes: its
	// write is on time if accepted within Work + OnTime of the fire.
	Work map[string]time.Duration
	// Recovery bounds how long after each fault heals the cluster may take
	// to be back at full speed: from then on every fire accepted, on time.
	// Zero skips the timing checks (for a member whose clock is wrong on
	// purpose, "on time" has no meaning).
	Recovery time.Duration
	// States is every state of a slot etcd committed (in its state key, or
	// with a record in a journal entry or a ring), in revision order (a
	// watch from the cluster's first revision): a fire started again (a
	// higher attempt) after a state recorded it succeeded is a forbidden
	// replay, whatever the faults (judgeStates). Nil skips the check.
	States []StateWrite
	// Records is every history record of the catalog's jobs etcd committed
	// other than a success, in revision order: a missed fire that an
	// overlap skip record accounts for is the job's overlap policy at work,
	// not a drop (docs/semantics.md: under fire-all, once a slot's misfires
	// have started, a fire that falls due while a run goes on is an overlap
	// too). Nil: no skip is known.
	Records []RecordWrite
	// Timed names the jobs whose fires measure speed; empty means all. A
	// long job's catch-up runs its missed fires one after another, so its
	// lateness after an outage says how long it works, not how fast the
	// cluster recovered.
	Timed []string
}

// Report is what the checker found.
type Report struct {
	Expected int // scheduled (slot, time) pairs in the window
	Accepted int // of those, accepted exactly once
	Stale    int // writes rejected by the fence (whole history)
	Replays  int // writes of an execution id that had already taken effect
	// Forbidden counts the fires run again as the contract does not allow
	// (judgeReplays, judgeStates), each execution id once.
	Forbidden  int
	Duplicates int // (slot, time) pairs accepted more than once
	Missed     int // pairs never accepted
	// Dropped counts, per misfire policy, the missed pairs that policy
	// allows inside a fault's window; they are part of Missed.
	Dropped map[config.Misfire]int
	// Overlapped counts the missed pairs a skip record of the job's
	// overlap policy accounts for (Spec.Records), whatever the misfire
	// policy and the faults; they are part of Missed.
	Overlapped int
	// Recovered is, per fault, how long after it healed every slot was
	// firing on time again (-1 if it never was within the window).
	Recovered map[string]time.Duration
	// Concurrent is, per concurrency limit (config.Limit's Pool), the
	// most runs of its jobs that ran at once (judgeConcurrency).
	Concurrent map[string]int
	Violations []string
}

// summary is the report on one line.
func (r Report) summary() string {
	return fmt.Sprintf("expected %d, accepted %d, stale rejected %d, replays %d (forbidden %d), duplicates %d, missed %d (dropped by policy: %v, overlap skips %d), recovered %v, most at once %v, %d violations",
		r.Expected, r.Accepted, r.Stale, r.Replays, r.Forbidden, r.Duplicates, r.Missed, r.Dropped, r.Overlapped, r.Recovered, r.Concurrent, len(r.Violations))
}

// OK reports whether the history passed.
func (r Report) OK() bool { return len(r.Violations) == 0 }

func (r *Report) violate(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

// Check holds the witness's history to the spec. It checks, per slot: no
// scheduled time accepted twice; accepted tokens never go down; every
// scheduled time in the window accepted once, except what the job's misfire
// policy allows to drop inside a fault's window or with the evidence that
// the fault caused it (slotLives.excused); and, after each fault heals,
// every fire on time again within spec.Recovery. Per concurrency limit, it
// checks that no more of its runs ran at once than it allows.
func Check(history []Attempt, spec Spec) Report {
	rep := Report{Dropped: map[config.Misfire]int{}, Recovered: map[string]time.Duration{}, Concurrent: map[string]int{}}
	accepted := map[key][]Attempt{}
	byID := map[string][]Attempt{}
	highest := map[string]Attempt{}
	ordered := append([]Attempt(nil), history...)
	sort.Slice(ordered, func(i, j int) bool { return ordered[i].Seq < ordered[j].Seq })
	for _, a := range ordered {
		switch {
		case a.Kind == Write && a.Outcome == Stale:
			rep.Stale++
		case a.Kind == Write && a.Outcome == Replay:
			rep.Replays++
		}
		if a.Outcome != Accepted || (a.Kind != Write && a.Kind != Raise) {
			continue
		}
		// Tokens: nothing below the highest admitted so far may be accepted.
		if h, ok := highest[a.Slot()]; ok && a.Token < h.Token {
			rep.violate("%s: %s with token %d by %s accepted after token %d by %s was (stale write accepted)",
				a.Slot(), a.Kind, a.Token, a.Member, h.Token, h.Member)
		} else {
			highest[a.Slot()] = a
		}
		if a.Kind == Write && a.Scheduled.Before(spec.Born) {
			rep.violate("%s: a fire scheduled at %s, before the catalog existed (%s), ran (member %s, token %d)", a.Slot(),
				a.Scheduled.Format(time.RFC3339Nano), spec.Born.Format(time.RFC3339Nano), a.Member, a.Token)
		}
		if a.Kind == Write {
			k := key{a.Slot(), a.Scheduled.UnixNano()}
			accepted[k] = append(accepted[k], a)
			byID[a.ExecutionID] = append(byID[a.ExecutionID], a)
		}
	}
	judgeStates(&rep, spec.States, judgeReplays(&rep, ordered, spec))
	judgeConcurrency(&rep, ordered, spec.Catalog)
	judgeChains(&rep, accepted, spec)
	for k, as := range accepted {
		if len(as) > 1 {
			rep.Duplicates++
			rep.violate("%s: scheduled %s accepted %d times: %s", k.slot, time.Unix(0, k.at).UTC().Format(time.RFC3339Nano), len(as), describe(as))
		}
	}
	for id, as := range byID {
		if len(as) > 1 && as[0].Scheduled.Equal(as[1].Scheduled) {
			continue // reported above
		}
		if len(as) > 1 {
			rep.violate("execution id %s accepted %d times for different fires: %s", id, len(as), describe(as))
		}
	}

	// Every scheduled time in the window, slot by slot.
	type bad struct {
		slot  string
		at    time.Time // scheduled
		until time.Time // when it stopped being bad: accepted late, or never
	}
	var bads []bad
	overlapped := overlapSkips(spec.Records)
	lives := newSlotLives(ordered, spec.States)
	for _, j := range spec.Catalog.Jobs {
		if j.Dependent() {
			continue // no schedule: judgeChains holds it
		}
		sched, err := j.ParsedSchedule()
		if err != nil {
			rep.violate("job %s: %v", j.Name, err)
			continue
		}
		for p := 0; p < j.Partitions; p++ {
			slot := fmt.Sprintf("%s/%d", j.Name, p)
			var fires, acceptedAt []time.Time // scheduled; accepted (zero: never)
			for t := sched.Next(spec.From.Add(-time.Nanosecond)); t.Before(spec.To); t = sched.Next(t) {
				rep.Expected++
				as := accepted[key{slot, t.UnixNano()}]
				if len(as) > 0 {
					rep.Accepted++
					fires, acceptedAt = append(fires, t), append(acceptedAt, as[0].At)
					continue
				}
				rep.Missed++
				fires, acceptedAt = append(fires, t), append(acceptedAt, time.Time{})
				if skippedAt(overlapped[slot], t) {
					rep.Overlapped++
					continue
				}
				if j.Misfire != config.MisfireFireAll && (inDropWindow(spec.Faults, t) || lives.excused(spec.Faults, slot, t, nextAcceptedAt(accepted, slot, sched, t, spec.To), spec.Recovery, spec.OnTime)) {
					rep.Dropped[j.Misfire]++
					continue
				}
				why := "outside every fault's window"
				if j.Misfire == config.MisfireFireAll {
					why = "misfire fire-all drops nothing"
				}
				rep.violate("%s: scheduled %s never accepted (%s)", slot, t.UTC().Format(time.RFC3339Nano), why)
			}
			if len(spec.Timed) > 0 && !slices.Contains(spec.Timed, j.Name) {
				continue
			}
			// A late fire is bad until it was accepted; a missed one until the
			// slot's next fire was (zero: never, within the history).
			var next time.Time
			if as := nextAccepted(accepted, slot, sched, spec.To); len(as) > 0 {
				next = as[0].At
			}
			for i := len(fires) - 1; i >= 0; i-- {
				switch at := acceptedAt[i]; {
				case at.IsZero():
					bads = append(bads, bad{slot, fires[i], next})
				case at.Sub(fires[i]) > spec.Work[j.Name]+spec.OnTime:
					bads = append(bads, bad{slot, fires[i], at})
					next = at
				default:
					next = at
				}
			}
		}
	}

	if spec.Recovery <= 0 {
		return rep
	}
	// Back to full speed: after each heal, the last bad fire before the next
	// fault marks when the cluster recovered.
	for i, f := range spec.Faults {
		end := spec.To
		if i+1 < len(spec.Faults) {
			end = spec.Faults[i+1].Start
		}
		recovered, never, by := f.Heal, false, ""
		for _, b := range bads {
			// A fire still bad when the next fault began is that fault's.
			if !b.at.Before(f.Heal) && b.at.Before(end) && (end.Equal(spec.To) || b.until.Before(end)) {
				never = never || b.until.IsZero()
				if b.until.After(recovered) {
					recovered = b.until
					by = fmt.Sprintf("%s's fire at %s, accepted at %s", b.slot, b.at.Format("15:04:05.000"), b.until.Format("15:04:05.000"))
				}
			}
		}
		if never {
			rep.Recovered[f.Name] = -1
			rep.violate("%s: a slot never fired again after it healed", f.Name)
			continue
		}
		took := recovered.Sub(f.Heal)
		rep.Recovered[f.Name] = took
		if took > spec.Recovery {
			rep.violate("%s: back at full speed %s after it healed (the last late or missed fire: %s); the bound is %s", f.Name, took.Round(time.Millisecond), by, spec.Recovery)
		}
	}
	return rep
}

// judgeReplays classifies every replay (a write of an execution id that
// had already taken effect). The only one allowed is the in-doubt fire's:
// the attempt before it ran on a member that a fault then killed, paused or
// cut off (Fault.InDoubt), and a new holder (a higher token) runs it again,
// once. Forbidden: a replay after a graceful stop or with no fault at all
// (the result was recorded, or should have been), a replay by the holder
// that had already run the fire, and a second replay under one token.
// Held by TestReplaysAreJudged.
func judgeReplays(rep *Report, ordered []Attempt, spec Spec) (forbidden map[string]bool) {
	forbidden = map[string]bool{}   // execution ids
	earlier := map[string]Attempt{} // the last write of each execution id that reached the fence
	replays := map[string]int{}     // per execution id and token
	for _, a := range ordered {
		if a.Kind != Write || (a.Outcome != Accepted && a.Outcome != Replay) {
			continue
		}
		prev, ok := earlier[a.ExecutionID]
		earlier[a.ExecutionID] = a
		if a.Outcome != Replay || !ok {
			continue
		}
		tk := fmt.Sprintf("%s@%d", a.ExecutionID, a.Token)
		replays[tk]++
		var why string
		switch {
		case replays[tk] > 1:
			why = fmt.Sprintf("run again %d times under token %d (a change of holder allows one re-run)", replays[tk], a.Token)
		case a.Token <= prev.Token:
			why = fmt.Sprintf("run again by the holder that had run it (token %d after %d)", a.Token, prev.Token)
		case !anyInDoubt(spec, prev.Member, prev.At, a.At):
			why = fmt.Sprintf("run again after %s's run at %s though no fault killed, paused or cut off %s in between (its result was, or should have been, recorded)",
				prev.Member, prev.At.Format("15:04:05.000"), prev.Member)
		}
		if why != "" {
			if !forbidden[a.ExecutionID] {
				rep.Forbidden++
			}
			forbidden[a.ExecutionID] = true
			rep.violate("%s: scheduled %s (id %s), forbidden replay at %s by %s (token %d): %s", a.Slot(), a.Scheduled.UTC().Format(time.RFC3339Nano),
				a.ExecutionID, a.At.Format("15:04:05.000"), a.Member, a.Token, why)
		}
	}
	return forbidden
}

// RecordWrite is one history record, as etcd committed it.
type RecordWrite struct {
	Revision int64
	Record   history.Record
}

// overlapSkips are, per slot, the fires records skipped for the overlap
// policy (history.SkippedRunning, history.SkippedQueued): the scheduled times
// each skip record stands for, its Repeats included, from its first to its
// last.
func overlapSkips(records []RecordWrite) map[string][][2]time.Time {
	out := map[string][][2]time.Time{}
	for _, w := range records {
		r := w.Record
		if !overlapSkip(r) {
			continue
		}
		last := r.ScheduledTime
		if r.LastScheduledTime != nil {
			last = *r.LastScheduledTime
		}
		slot := fmt.Sprintf("%s/%d", r.Job, r.Partition)
		out[slot] = append(out[slot], [2]time.Time{r.ScheduledTime, last})
	}
	return out
}

// overlapSkip reports whether r is a skip record of the overlap policy.
func overlapSkip(r history.Record) bool {
	return r.Outcome == history.OutcomeSkipped && (r.Error == history.SkippedRunning || r.Error == history.SkippedQueued)
}

func skippedAt(spans [][2]time.Time, t time.Time) bool {
	for _, s := range spans {
		if !t.Before(s[0]) && !t.After(s[1]) {
			return true
		}
	}
	return false
}

// StateWrite is one state of a slot, as etcd committed it.
type StateWrite struct {
	Slot     string
	Revision int64
	State    history.SlotState
}

// judgeStates holds the state keys' writes to the rule that a fire whose
// success was recorded never starts again: a state that starts scheduled
// time T at attempt a > 1 after one that recorded T (or a later fire)
// finished with success is a forbidden replay, known from etcd's revisions
// alone; a fire the witness's judge found already (seen) counts once.
// Held by TestStartAfterARecordedSuccessIsForbidden.
func judgeStates(rep *Report, states []StateWrite, seen map[string]bool) {
	type succeeded struct {
		finished time.Time
		revision int64
	}
	done := map[string]succeeded{}
	reported := map[string]bool{}
	for _, w := range states {
		st := w.State
		if d, ok := done[w.Slot]; ok && st.StartedAttempt > 1 && !st.Started.After(d.finished) && st.Unfinished() {
			k := fmt.Sprintf("%s %d", st.StartedID, st.StartedAttempt)
			if !reported[k] {
				reported[k] = true
				if !seen[st.StartedID] {
					rep.Forbidden++
				}
				seen[st.StartedID] = true
				rep.violate("%s: scheduled %s (id %s), forbidden replay: attempt %d started at revision %d under token %d after revision %d recorded %s finished with success",
					w.Slot, st.Started.UTC().Format(time.RFC3339Nano), st.StartedID, st.StartedAttempt, w.Revision, st.Token, d.revision,
					d.finished.UTC().Format(time.RFC3339Nano))
			}
		}
		if st.Outcome == string(jobs.Succeeded) && st.Finished.After(done[w.Slot].finished) {
			done[w.Slot] = succeeded{st.Finished, w.Revision}
		}
	}
}

func anyInDoubt(spec Spec, member string, ran, again time.Time) bool {
	for _, f := range spec.Faults {
		if f.putsInDoubt(member, ran, again, spec.OnTime) {
			return true
		}
	}
	return false
}

// nextAccepted returns the acceptances of the slot's first fire at or after
// t that has any.
func nextAccepted(accepted map[key][]Attempt, slot string, sched config.Schedule, t time.Time) []Attempt {
	var last int64
	for k := range accepted {
		if k.slot == slot && k.at > last {
			last = k.at
		}
	}
	for ; t.UnixNano() <= last; t = sched.Next(t) {
		if as := accepted[key{slot, t.UnixNano()}]; len(as) > 0 {
			return as
		}
	}
	return nil
}

// nextAcceptedAt is when the slot's first fire after t that was accepted
// was, or none if none was.
func nextAcceptedAt(accepted map[key][]Attempt, slot string, sched config.Schedule, t, none time.Time) time.Time {
	if as := nextAccepted(accepted, slot, sched, sched.Next(t)); len(as) > 0 {
		return as[0].At
	}
	return none
}

// inDropWindow reports whether t falls in a fault's window of allowed drops.
func inDropWindow(faults []Fault, t time.Time) bool {
	for _, f := range faults {
		if f.MayDrop > 0 && !t.Before(f.Start) && !t.After(f.Start.Add(f.MayDrop)) {
			return true
		}
	}
	return false
}

func describe(as []Attempt) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, fmt.Sprintf("[seq %d token %d member %s id %s]", a.Seq, a.Token, a.Member, a.ExecutionID))
	}
	return strings.Join(parts, " ")
}

// judgeConcurrency holds the runs of the jobs with a concurrency limit
// (config.Catalog.Limit) to it: at no point of the witness's log do more
// of a limit's runs run at once than its N. A run counts as running from
// its start mark, its Hold (it began its work at the witness), to its end
// mark: the first Write of the same execution id, token and member after
// it, whatever the fence answered (its work was done), or its End (its
// client went away: its member cancelled it, on a lost slot or a closed
// trust window, or died). Both marks are taken by the witness as it sees
// them, in one order (Seq), so a run of a frozen member runs until its work
// at the witness is done, frozen or not: the check counts the work, not
// what its member believes. A run whose end mark is missing runs to the end
// of the log. Held by TestCheckerCountsConcurrentRuns.
func judgeConcurrency(rep *Report, ordered []Attempt, cat *config.Catalog) {
	limits := map[string]config.Limit{}
	for _, j := range cat.Jobs {
		if l := cat.Limit(j); l.Limited() {
			limits[j.Name] = l
		}
	}
	running := map[string]map[string]Attempt{} // pool → run → its Hold
	reported := map[string]bool{}
	for _, a := range ordered {
		l, ok := limits[a.Job]
		if !ok {
			continue
		}
		run := fmt.Sprintf("%s@%d@%s", a.ExecutionID, a.Token, a.Member)
		switch {
		case a.Kind == Hold && a.Outcome == Noted:
			if running[l.Pool] == nil {
				running[l.Pool] = map[string]Attempt{}
			}
			running[l.Pool][run] = a
			n := len(running[l.Pool])
			rep.Concurrent[l.Pool] = max(rep.Concurrent[l.Pool], n)
			if n > l.N && !reported[run] {
				reported[run] = true
				var others []Attempt
				for _, o := range running[l.Pool] {
					others = append(others, o)
				}
				sort.Slice(others, func(i, j int) bool { return others[i].Seq < others[j].Seq })
				rep.violate("%s: %d runs at once, over its limit of %d, when %s (id %s, member %s) began at %s: %s", l.Pool, n, l.N,
					a.Slot(), a.ExecutionID, a.Member, a.At.Format("15:04:05.000"), describe(others))
			}
		case a.Kind == Write || a.Kind == End:
			delete(running[l.Pool], run)
		}
	}
}
