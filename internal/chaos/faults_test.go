package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"

	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// mayDrop is the longest outage a member fault may cause: the lease running
// out (TTL) and the next owner's detection, campaign and fence raise.
const mayDrop = ttl + time.Second

// electionOutage is how long an etcd leader election may stop the members:
// etcd's followers wait out their election timeout (1 s by default) before
// electing, and with a 2 s TTL a member's keepalive (every TTL/3) then misses
// its trust window (TTL − TTL/6 after the last ack), so the members rejoin.
// Longer TTLs ride an election out; the suite's short one shows the rejoin.
// The soak measured up to 5.5 s from the kill to the last dropped fire.
const electionOutage = 2*ttl + 2*time.Second

// steady lets the cluster run undisturbed for d.
func steady(d time.Duration) { time.Sleep(d) }

// 1. kill -9 the member that leads the most slots: its slots move to the
// others after its lease expires; fire-all jobs catch every missed fire up,
// and no fire runs twice.
func TestKillLeader(t *testing.T) {
	c := newCluster(t, 3)
	from := windowStart()
	steady(3 * time.Second)
	st := c.waitSettled(3, 30*time.Second)
	victim, id := c.mostSlots(st, "")
	killed := time.Now()
	victim.signal(t, syscall.SIGKILL)
	c.waitSettled(2, 30*time.Second)
	t.Logf("kill -9 %s (%s) → every slot owned by the others after %s", victim.name, id, time.Since(killed).Round(time.Millisecond))
	steady(6 * time.Second)
	c.finish("kill -9 the leader of most slots", from, []Fault{{Name: "kill", Start: killed, Heal: killed, MayDrop: mayDrop, InDoubt: []string{id}}})
}

// 2. SIGSTOP a leader for 2×TTL while one of its command jobs is between its
// begin and its write, then SIGCONT. The write lands while the member is
// frozen, after the next owner raised the fence: rejected. The woken member
// starts nothing with its old tokens, and rejoins as a fresh member.
func TestPausedLeader(t *testing.T) {
	c := newCluster(t, 3)
	from := windowStart()
	steady(2 * time.Second)
	st := c.waitSettled(3, 30*time.Second)
	victim, oldID := c.mostSlots(st, "sweep")
	// Freeze it right after one of its sweep executions begins.
	begun, ok := c.witness.WaitFor(30*time.Second, func(a Attempt) bool { return a.Kind == Begin && a.Member == oldID })
	if !ok {
		t.Fatalf("no sweep execution of %s began", victim.name)
	}
	victim.signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	c.waitSettled(2, 30*time.Second) // its lease expired; the others took its slots over
	time.Sleep(time.Until(stopped.Add(2 * ttl)))
	victim.signal(t, syscall.SIGCONT)
	resumed := time.Now()
	t.Logf("SIGSTOP %s (%s) %s after %s/%d began; SIGCONT after %s", victim.name, oldID, stopped.Sub(begun.At).Round(time.Millisecond),
		begun.Job, begun.Partition, resumed.Sub(stopped).Round(time.Millisecond))
	st = c.waitSettled(3, time.Minute) // rejoined
	if newID := c.idOf(st, victim); newID == oldID || newID == "" {
		t.Fatalf("the woken member did not rejoin as a fresh member: id %q (was %q)", newID, oldID)
	}
	steady(4 * time.Second)
	rep := c.finish("SIGSTOP a leader for 2×TTL", from, []Fault{{Name: "pause", Start: stopped, Heal: resumed, MayDrop: mayDrop, InDoubt: []string{oldID}}})

	// What was in flight when it froze was rejected; nothing it had not
	// started by then was started at all with its old tokens.
	var inFlight *Attempt
	for _, a := range c.witness.Attempts() {
		if a.Member != oldID {
			continue
		}
		if a.Kind == Write && a.ExecutionID == begun.ExecutionID {
			a := a
			inFlight = &a
		}
		if a.Kind != Raise && a.Scheduled.After(stopped.Add(200*time.Millisecond)) {
			t.Errorf("the frozen member started %s/%d scheduled %s (%s) with its old token %d", a.Job, a.Partition,
				a.Scheduled.Format(time.RFC3339Nano), a.Kind, a.Token)
		}
	}
	switch {
	case inFlight == nil:
		t.Errorf("the write of %s/%d (begun before the freeze) never reached the witness", begun.Job, begun.Partition)
	case inFlight.Outcome != Stale:
		t.Errorf("the in-flight write of the frozen member was %s at %s (%s after the freeze); want rejected as stale",
			inFlight.Outcome, inFlight.At.Format(time.RFC3339Nano), inFlight.At.Sub(stopped).Round(time.Millisecond))
	}
	if rep.Stale == 0 {
		t.Error("the witness rejected nothing as stale")
	}
}

// 3. Cut one member off from etcd (its proxies drop everything both ways)
// for 2×TTL, then heal: it stops before its lease can have expired, the
// others take over, and it rejoins as a fresh member.
func TestPartitionedMember(t *testing.T) {
	c := newCluster(t, 3)
	from := windowStart()
	steady(3 * time.Second)
	st := c.waitSettled(3, 30*time.Second)
	victim, oldID := c.mostSlots(st, "")
	cut := time.Now()
	victim.cut()
	time.Sleep(2 * ttl)
	victim.heal()
	healed := time.Now()
	st = c.waitSettled(3, time.Minute)
	if newID := c.idOf(st, victim); newID == oldID {
		t.Fatalf("the cut-off member kept its id %s: it should have stopped and joined again", oldID)
	}
	t.Logf("%s cut off for %s; back as a fresh member %s after healing", victim.name, healed.Sub(cut).Round(time.Millisecond), time.Since(healed).Round(time.Millisecond))
	steady(4 * time.Second)
	c.finish("cut one member off etcd for 2×TTL", from, []Fault{{Name: "cut", Start: cut, Heal: healed, MayDrop: mayDrop, InDoubt: []string{oldID}}})
}

// 4. Slow network: 200 ms ± 100 ms added to every request one member sends
// to etcd, for 20 s. Its lease holds, so nothing moves and nothing is lost.
func TestSlowNetwork(t *testing.T) {
	c := newCluster(t, 3)
	from := windowStart()
	steady(2 * time.Second)
	st := c.waitSettled(3, 30*time.Second)
	victim, id := c.mostSlots(st, "")
	slowed := time.Now()
	victim.delay(200*time.Millisecond, 100*time.Millisecond)
	time.Sleep(20 * time.Second)
	victim.heal()
	healed := time.Now()
	st = c.waitSettled(3, 30*time.Second)
	if c.idOf(st, victim) != id {
		t.Errorf("%s lost its lease under 200±100 ms of latency (TTL %s)", victim.name, ttl)
	}
	steady(4 * time.Second)
	c.finish("200±100 ms on one member's etcd traffic for 20 s", from, []Fault{{Name: "slow", Start: slowed, Heal: healed}})
}

// 5. Kill the etcd leader; then kill a second etcd member, so quorum is
// lost, for 10 s; restore it. Without quorum nothing runs (no member can
// prove its lease); afterwards every slot fires again, and no kira process
// was restarted.
func TestQuorumLoss(t *testing.T) {
	c := newCluster(t, 3)
	from := windowStart()
	steady(2 * time.Second)
	first := c.etcdLeader()
	killedLeader := time.Now()
	c.etcd[first].proc.Signal(syscall.SIGKILL)
	<-c.etcd[first].proc.Done()
	second := c.etcdLeader() // the new leader: the one whose loss hurts most
	steady(3 * time.Second)
	lost := time.Now()
	c.etcd[second].proc.Signal(syscall.SIGKILL)
	<-c.etcd[second].proc.Done()
	time.Sleep(10 * time.Second)
	c.etcd[second].proc = startEtcd(t, c.etcd[second])
	restored := time.Now()
	c.waitSettled(3, time.Minute)
	t.Logf("etcd leader %s killed; %s killed %s later (no quorum) for %s; every slot owned again %s after restoring it",
		c.etcd[first].name, c.etcd[second].name, lost.Sub(killedLeader).Round(time.Millisecond), restored.Sub(lost).Round(time.Millisecond),
		time.Since(restored).Round(time.Millisecond))
	steady(4 * time.Second)
	for _, m := range c.members {
		if m.proc.Exited() {
			t.Errorf("kira member %s exited: it must ride out a quorum loss", m.name)
		}
	}
	c.finish("kill the etcd leader, then a 2nd etcd member for 10 s", from, []Fault{
		{Name: "etcd leader killed", Start: killedLeader, Heal: killedLeader, MayDrop: electionOutage, EveryMember: true},
		{Name: "quorum lost", Start: lost, Heal: restored, MayDrop: restored.Sub(lost) + mayDrop, EveryMember: true},
	})
	// Without quorum nothing ran: once every member's trust in its lease
	// had run out (at most TTL after the last renewal), no write was accepted
	// until quorum came back.
	quiet := lost.Add(ttl + 500*time.Millisecond)
	for _, a := range c.witness.Attempts() {
		if a.Kind == Write && a.Outcome == Accepted && a.At.After(quiet) && a.At.Before(restored) {
			t.Errorf("%s/%d scheduled %s was accepted at %s, %s after quorum was lost", a.Job, a.Partition,
				a.Scheduled.Format(time.RFC3339Nano), a.At.Format(time.RFC3339Nano), a.At.Sub(lost).Round(time.Millisecond))
		}
	}
	c.etcd[first].proc = startEtcd(t, c.etcd[first])
}

func startEtcd(t *testing.T, e *etcdNode) *etcdtest.Process {
	return etcdtest.StartProcess(t, kiraBin, e.args...)
}

// 6. Rolling restart: each member in turn gets SIGTERM, exits 0, and starts
// again (a new id). Graceful handovers lose nothing, even with a command
// job in flight on the stopping member.
func TestRollingRestart(t *testing.T) {
	c := newCluster(t, 3)
	from := windowStart()
	steady(2 * time.Second)
	var faults []Fault
	for i, m := range append([]*memberProc(nil), c.members...) {
		stopped, exited := c.stopGracefully(m)
		c.waitSettled(3, time.Minute)
		back := time.Now()
		t.Logf("%s: SIGTERM → exit %s; restarted and every slot owned %s later", m.name, exited.Sub(stopped).Round(time.Millisecond), back.Sub(exited).Round(time.Millisecond))
		faults = append(faults, Fault{Name: fmt.Sprintf("restart %d", i+1), Start: stopped, Heal: back})
		steady(2 * time.Second)
	}
	steady(2 * time.Second)
	c.finish("rolling restart of every member (SIGTERM)", from, faults)
}

// 6b. Graceful stops during runs, under load: 1,000 more slots firing every
// second keep every member's writer busy and their handovers many; six
// times, the member whose run of "long" (1 s of work every 2 s) has just
// begun gets SIGTERM 0.3 s into the run, finishes it within its grace,
// hands its slots over and exits 0, and starts again. Nothing is in doubt
// after a graceful stop: any fire run again is a forbidden replay. The load
// is what a 2-core machine carries beside the three etcd processes, the
// witness and a stop every few seconds: at 2,000 the members of a slower
// machine fell behind (hundreds of runs waiting, leases lost), and the
// test then judged the machine, not the handover.
func TestGracefulStopDuringARunUnderLoad(t *testing.T) {
	c := newLoadedCluster(t, 3, 1000, longJob)
	from := windowStart()
	steady(2 * time.Second)
	var faults []Fault
	for i := 0; i < 6; i++ {
		m := c.runningMember("long")
		if m == nil {
			t.Fatal("no run of long began on a member of the view")
		}
		time.Sleep(300 * time.Millisecond)
		stopped, exited := c.stopGracefully(m)
		c.waitSettled(3, time.Minute)
		t.Logf("%s: SIGTERM 0.3 s into long's run → exit after %s", m.name, exited.Sub(stopped).Round(time.Millisecond))
		// Under this load a handover (the stop's, and the one back to the
		// restarted member) can take longer than the 500 ms a late fire
		// may be: fire-once and skip may drop then. Fire-all drops nothing.
		healed := time.Now()
		faults = append(faults, Fault{Name: fmt.Sprintf("SIGTERM %d", i+1), Start: stopped, Heal: healed, MayDrop: healed.Sub(stopped) + 2*time.Second})
	}
	steady(4 * time.Second)
	c.finish("SIGTERM during a run, 1,000 more slots busy, 6 times", from, faults, func(s *Spec) { s.Recovery = 0 })
}

// longJob is a command job whose runs are most of its period: a member
// stopped during one hands the slot over right after the run's result.
const longJob = `  - name: long
    schedule: "@every 2s"
    misfire: fire-all
    catchup_window: 2m
    overlap: queue        # a fire during a catch-up's run waits for it
    timeout: 10s
    fence_url: "{{W}}/fence"
    command: ["{{WRITER}}", "{{W}}", "1s"]
`

// stopGracefully sends m SIGTERM, waits for it to exit 0 and starts it
// again (a new incarnation); it returns when the signal was sent and when
// the process exited.
func (c *cluster) stopGracefully(m *memberProc) (stopped, exited time.Time) {
	c.t.Helper()
	stopped = time.Now()
	if code := m.proc.Stop(c.t, syscall.SIGTERM, 30*time.Second); code != 0 {
		c.t.Fatalf("%s exited %d on SIGTERM", m.name, code)
	}
	exited = time.Now()
	c.restart(m, 0)
	return stopped, exited
}

// runningMember is the member that has just begun a run of job (the
// witness's begin), waited for up to 30 s; nil if none began.
func (c *cluster) runningMember(job string) *memberProc {
	c.t.Helper()
	st := c.waitSettled(3, time.Minute)
	begun, ok := c.witness.WaitFor(30*time.Second, func(a Attempt) bool { return a.Kind == Begin && a.Job == job })
	if !ok {
		return nil
	}
	return c.byID(st, begun.Member)
}

// 7. Scale out 3→5 and back to 3 while jobs run every second: slots move on
// each view change, by graceful handover.
func TestScaleOutAndIn(t *testing.T) {
	c := newCluster(t, 3)
	from := windowStart()
	steady(2 * time.Second)
	out := time.Now()
	c.addMember("m3")
	c.addMember("m4")
	c.waitSettled(5, time.Minute)
	scaledOut := time.Now()
	steady(4 * time.Second)
	in := time.Now()
	for _, m := range c.members[3:] {
		if code := m.proc.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
			t.Fatalf("%s exited %d on SIGTERM", m.name, code)
		}
	}
	c.waitSettled(3, time.Minute)
	scaledIn := time.Now()
	t.Logf("3→5 settled in %s; 5→3 in %s", scaledOut.Sub(out).Round(time.Millisecond), scaledIn.Sub(in).Round(time.Millisecond))
	steady(4 * time.Second)
	c.finish("scale out 3→5, back to 3", from, []Fault{
		{Name: "3→5", Start: out, Heal: scaledOut},
		{Name: "5→3", Start: in, Heal: scaledIn},
	})
}

// 8. A member whose wall clock is 30 s ahead. It runs its slots' fires 30 s
// early by the others' clocks, and when slots move between it and the
// others neither side runs a fire twice: state and tokens are etcd
// revisions, not times. (Fires a skewed member's catch-up collapses under
// fire-once or skip are allowed to drop while it is in the cluster, and for
// the skew after it left: what it ran or collapsed, it did by its own clock,
// so a slot it held is done up to 30 s past the others' now. Fire-all drops
// nothing.)
func TestClockSkew(t *testing.T) {
	const skew = 30 * time.Second
	c := newCluster(t, 3)
	from := windowStart()
	steady(2 * time.Second)
	skewed, first := c.members[2], c.members[0]
	skewStart := time.Now()
	if code := skewed.proc.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("%s exited %d", skewed.name, code)
	}
	c.restart(skewed, skew)
	c.waitSettled(3, time.Minute)
	steady(3 * time.Second)
	// Move more slots onto the skewed member, and back.
	if code := first.proc.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("%s exited %d", first.name, code)
	}
	c.waitSettled(2, 30*time.Second)
	steady(3 * time.Second)
	c.restart(first, 0)
	c.waitSettled(3, time.Minute)
	steady(3 * time.Second)
	if code := skewed.proc.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("%s exited %d", skewed.name, code)
	}
	skewEnd := time.Now()
	c.waitSettled(2, 30*time.Second)
	steady(4 * time.Second)
	rep := c.finish("one member's clock 30 s ahead", from, []Fault{{Name: "skew", Start: skewStart, Heal: skewEnd, MayDrop: skewEnd.Sub(skewStart) + skew + mayDrop}},
		func(s *Spec) { s.Recovery = 0 })
	// Every handover here is graceful, so no fire is ever unfinished: a
	// replay would be a fire run again after it finished (the witness's
	// idempotency hid it; the state must not need it to).
	if rep.Replays > 0 {
		t.Errorf("%d fires ran again after they had finished", rep.Replays)
	}
}

// TestRandomFaults runs schedules of faults drawn from a seed on one
// cluster each, with a busy load job, and holds each history to the strict
// checker. The seed is logged; the same seed draws the same faults, in the
// same order, with the same pauses (which member a fault hits follows the
// cluster: the one leading the most slots). CI runs one schedule of
// -chaos.faults faults; before a release, many:
//
//	go test ./internal/chaos -run TestRandomFaults -chaos.seeds 20 -chaos.faults 10 -timeout 3h -v
//
// and one that failed again: -chaos.seed N -chaos.seeds 1.
func TestRandomFaults(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	for i := 0; i < *seedsFlag; i++ {
		s := seed + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			t.Logf("schedule seed %d: replay it with -chaos.seed %d -chaos.seeds 1 -chaos.faults %d", s, s, *faultsFlag)
			runSchedule(t, s, *faultsFlag)
		})
	}
}

// injector injects one fault on c and returns it once it has healed.
type injector func(c *cluster) Fault

// faultKinds are the faults a schedule draws from, by name (drawn in
// name order, so a seed means the same schedule on every machine).
var faultKinds = map[string]injector{
	"kill -9": func(c *cluster) Fault {
		m, id := c.victim()
		at := time.Now()
		m.signal(c.t, syscall.SIGKILL)
		kiratest.Receive(c.t, m.proc.Done(), 30*time.Second, "the killed member to exit")
		c.waitSettled(2, time.Minute)
		c.restart(m, 0)
		return Fault{Name: "kill -9 " + m.name, Start: at, Heal: at, MayDrop: mayDrop, InDoubt: []string{id}}
	},
	"SIGSTOP": func(c *cluster) Fault {
		m, id := c.victim()
		at := time.Now()
		m.signal(c.t, syscall.SIGSTOP)
		time.Sleep(2 * ttl)
		m.signal(c.t, syscall.SIGCONT)
		return Fault{Name: "SIGSTOP " + m.name, Start: at, Heal: time.Now(), MayDrop: mayDrop, InDoubt: []string{id}}
	},
	"cut": func(c *cluster) Fault {
		m, id := c.victim()
		at := time.Now()
		m.cut()
		time.Sleep(2 * ttl)
		m.heal()
		return Fault{Name: "cut " + m.name, Start: at, Heal: time.Now(), MayDrop: mayDrop, InDoubt: []string{id}}
	},
	// A stall: every request of one member, its writer's too, waits 1.5 s
	// for 4 s. Its lease may run out, so its fires may be in doubt.
	"stall": func(c *cluster) Fault {
		m, id := c.victim()
		at := time.Now()
		m.delay(1500*time.Millisecond, 0)
		time.Sleep(4 * time.Second)
		m.heal()
		return Fault{Name: "stall " + m.name, Start: at, Heal: time.Now(), MayDrop: 4*time.Second + mayDrop, InDoubt: []string{id}}
	},
	"SIGTERM during a run": func(c *cluster) Fault {
		m := c.runningMember("sweep")
		if m == nil {
			m, _ = c.victim()
		}
		time.Sleep(300 * time.Millisecond)
		at, _ := c.stopGracefully(m)
		return Fault{Name: "SIGTERM " + m.name, Start: at, Heal: time.Now()}
	},
	"etcd leader": func(c *cluster) Fault {
		i := c.etcdLeader()
		at := time.Now()
		c.etcd[i].proc.Signal(syscall.SIGKILL)
		kiratest.Receive(c.t, c.etcd[i].proc.Done(), 30*time.Second, "the killed etcd member to exit")
		time.Sleep(5 * time.Second)
		c.etcd[i].proc = startEtcd(c.t, c.etcd[i])
		return Fault{Name: "kill etcd leader " + c.etcd[i].name, Start: at, Heal: time.Now(), MayDrop: electionOutage, EveryMember: true}
	},
	"lost answers": func(c *cluster) Fault { return loseAnswers(c, lostAnswers) },
	"compact": func(c *cluster) Fault {
		at := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := c.cli.Get(ctx, "compact-probe")
		if err == nil {
			_, err = c.cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
		}
		if err != nil {
			c.t.Fatalf("compaction: %v", err)
		}
		return Fault{Name: "compact", Start: at, Heal: time.Now()}
	},
	"defragment": func(c *cluster) Fault {
		at := time.Now()
		for _, e := range c.etcd {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := c.cli.Defragment(ctx, e.clientURL)
			cancel()
			if err != nil {
				c.t.Fatalf("defragmenting %s: %v", e.name, err)
			}
		}
		return Fault{Name: "defragment", Start: at, Heal: time.Now()}
	},
}

// lostAnswers is how long a "lost answers" fault of the random schedule
// drops what etcd answers one member: less than the TTL, so its lease may
// outlive it.
const lostAnswers = 1200 * time.Millisecond

// answerWait is how long a member waits for the answer of a state write
// (the fenced writer's commit timeout): a write whose answer was lost holds
// the slots of its transaction up that long after the fault heals.
const answerWait = 5 * time.Second

// loseAnswers drops, for d, every answer etcd sends the member that leads
// the most slots, whose requests etcd still applies. Its fires may be
// dropped until its writes sent meanwhile have waited out answerWait.
func loseAnswers(c *cluster, d time.Duration) Fault {
	m, id := c.victim()
	at := time.Now()
	m.loseAnswers()
	time.Sleep(d)
	m.heal()
	return Fault{Name: "lost answers " + m.name, Start: at, Heal: time.Now(), MayDrop: d + answerWait + mayDrop, InDoubt: []string{id}}
}

// 9. Lost answers: three times, etcd applies what the member that leads
// the most slots sends it, under load, while every answer is dropped; its
// journal wraps round every second. The second time lasts past the TTL, so
// the member loses its lease and its slots move. Its writes are "maybe
// applied": none may make a finished fire run again, and the strict
// checker also holds every state etcd committed to that.
func TestLostAnswers(t *testing.T) {
	c := newLoadedCluster(t, 3, 300, "", "--journal-entries", "8")
	from := windowStart()
	steady(3 * time.Second)
	var faults []Fault
	for _, d := range []time.Duration{lostAnswers, ttl + time.Second, lostAnswers} {
		f := loseAnswers(c, d)
		t.Logf("%s %s → %s", f.Name, f.Start.Format("15:04:05.000"), f.Heal.Format("15:04:05.000"))
		faults = append(faults, f)
		c.waitSettled(3, 2*time.Minute)
		steady(3 * time.Second)
	}
	steady(4 * time.Second)
	c.finish("answers lost after etcd applied the writes, 1.2 s, 3 s, 1.2 s", from, faults, func(s *Spec) { s.Recovery = 0 })
}

// victim is the member that leads the most slots, with its id.
func (c *cluster) victim() (*memberProc, string) {
	st := c.waitSettled(3, time.Minute)
	return c.mostSlots(st, "")
}

// journalArgs are the members' journal flags of a schedule: with
// -chaos.journal N their journals have N keys, so a small N makes them wrap
// round every few seconds under the load.
func journalArgs() []string {
	if *journalFlag <= 0 {
		return nil
	}
	return []string{"--journal-entries", fmt.Sprint(*journalFlag)}
}

// runSchedule runs n faults drawn from seed on a cluster of its own, each
// followed by a pause of 2 to 6 s, and checks the history.
func runSchedule(t *testing.T, seed uint64, n int) {
	c := newLoadedCluster(t, 3, 300, longJob, journalArgs()...)
	from := windowStart()
	rng := rand.New(rand.NewPCG(seed, 0))
	names := make([]string, 0, len(faultKinds))
	for name := range faultKinds {
		names = append(names, name)
	}
	sort.Strings(names)
	var injected []Fault
	for i := 0; i < n; i++ {
		name := names[rng.IntN(len(names))]
		pause := 2*time.Second + time.Duration(rng.IntN(4000))*time.Millisecond
		f := faultKinds[name](c)
		t.Logf("fault %d: %s %s → %s, then %s", i+1, f.Name, f.Start.Format("15:04:05.000"), f.Heal.Format("15:04:05.000"), pause)
		injected = append(injected, f)
		c.waitSettled(3, 2*time.Minute)
		steady(pause)
	}
	steady(4 * time.Second)
	c.finish(fmt.Sprintf("%d random faults, seed %d", n, seed), from, injected, func(s *Spec) { s.Recovery = 0 })
}
