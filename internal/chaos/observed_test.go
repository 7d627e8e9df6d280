package chaos

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// lostLease matches the line a member logs when its lease deadline passes
// without a renewal acknowledged (scheduler's "lost the lease"): it cancels
// every execution and joins again as a new member.
var lostLease = regexp.MustCompile(`(?m)^time=(\S+) level=ERROR msg="lost the lease: cancelled every execution" member=(\S+)`)

// leaseLosses are the losses of its lease a member's output reports, as
// faults: the member was cut off as a killed one is (a fire it ran may be
// in doubt, and run again once by its next holder), from up to a TTL
// before it logged the loss (its last renewal acknowledged), and what a
// misfire policy drops is allowed for mayDrop after it.
func leaseLosses(output string) []Fault {
	var out []Fault
	for _, m := range lostLease.FindAllStringSubmatch(output, -1) {
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		out = append(out, Fault{Name: "lease lost by " + m[2] + " (not injected)", Start: at.Add(-ttl), Heal: at, MayDrop: ttl + mayDrop, InDoubt: []string{m[2]}})
	}
	return out
}

// unexplained are the losses no injected fault accounts for: a member the
// machine's load kept from renewing in time, with nothing injected into
// it. A loss an injected fault explains adds nothing, so the windows that
// fault gives stay as they were.
func unexplained(losses, injected []Fault, slack time.Duration) []Fault {
	var out []Fault
	for _, l := range losses {
		explained := false
		for _, f := range injected {
			explained = explained || f.putsInDoubt(l.InDoubt[0], l.Heal, l.Heal, slack)
		}
		if !explained {
			out = append(out, l)
		}
	}
	return out
}

// observedFaults are the members' lease losses, in every process each
// member ran, that the injected faults do not explain. It first waits for
// what the members printed up to now (waitOutputs).
func (c *cluster) observedFaults(injected []Fault, slack time.Duration) []Fault {
	c.waitOutputs(time.Now(), outputLag)
	var losses []Fault
	for _, m := range c.members {
		for _, p := range append(m.past, m.proc) {
			losses = append(losses, leaseLosses(p.Output())...)
		}
	}
	return unexplained(losses, injected, slack)
}

// outputLag bounds how long observedFaults waits for the members' output.
const outputLag = 20 * time.Second

// waitOutputs waits, up to limit, until every member process still running
// has printed a line logged at or after at (a member logs every execution,
// and every job of the suite fires each second or more often). A member's
// output reaches the test through a pipe that, on a loaded machine, lags
// what it wrote by seconds: a lease loss logged before the judgement but
// not yet read would leave the replays it explains judged forbidden.
func (c *cluster) waitOutputs(at time.Time, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for _, m := range c.members {
		for !m.proc.Exited() && lastLogged(m.proc.Output()).Before(at) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// lastLogged is the time of output's last whole line that starts with a
// log time (time=…), or the zero time.
func lastLogged(output string) time.Time {
	end := strings.LastIndexByte(output, '\n')
	for end > 0 {
		start := strings.LastIndexByte(output[:end], '\n') + 1
		if line, ok := strings.CutPrefix(output[start:end], "time="); ok {
			stamp, _, _ := strings.Cut(line, " ")
			if at, err := time.Parse(time.RFC3339Nano, stamp); err == nil {
				return at
			}
		}
		end = start - 1
	}
	return time.Time{}
}

func TestLastLogged(t *testing.T) {
	out := "time=2026-12-07T15:29:53.505Z level=INFO msg=a\nnot a log line\ntime=2026-12-07T15:29:54.5Z level=INFO msg=b\ntime=2026-12-07T15:29:55Z lev"
	if got, want := lastLogged(out), time.Date(2026, 12, 7, 15, 29, 54, 5e8, time.UTC); !got.Equal(want) {
		t.Fatalf("lastLogged = %v; want %v (the last whole line's)", got, want)
	}
	if got := lastLogged("no log\n"); !got.IsZero() {
		t.Fatalf("lastLogged of no log line = %v; want zero", got)
	}
}

// A member that logs the loss of its lease with nothing injected into it is
// in doubt from then: its fire may run again once, by a new holder. A loss
// during an injected fault that puts the member in doubt adds nothing.
func TestObservedLeaseLossesAreFaultsOfTheirOwn(t *testing.T) {
	at := time.Date(2026, 12, 7, 15, 29, 53, 534e6, time.UTC)
	output := `time=2026-12-07T15:29:53.505Z level=INFO msg="slot lost" slot=ledger/5 token=13 reason="scheduler: lease deadline passed"
time=2026-12-07T15:29:53.534Z level=ERROR msg="lost the lease: cancelled every execution" member=vm-a err="scheduler: lease deadline passed"
time=2026-12-07T15:30:20.000Z level=ERROR msg="lost the lease: cancelled every execution" member=vm-b err="scheduler: lease deadline passed"
`
	losses := leaseLosses(output)
	if len(losses) != 2 || !losses[0].Heal.Equal(at) || losses[0].InDoubt[0] != "vm-a" || losses[1].InDoubt[0] != "vm-b" {
		t.Fatalf("losses %+v; want vm-a's at %s and vm-b's", losses, at)
	}
	stop := Fault{Name: "SIGSTOP vm-b", Start: at.Add(25 * time.Second), Heal: at.Add(27 * time.Second), MayDrop: mayDrop, InDoubt: []string{"vm-b"}}
	got := unexplained(losses, []Fault{stop}, time.Second)
	if len(got) != 1 || got[0].InDoubt[0] != "vm-a" {
		t.Fatalf("unexplained %+v; want only vm-a's (vm-b's came with its SIGSTOP)", got)
	}
	spec := Spec{Faults: got}
	if !anyInDoubt(spec, "vm-a", at.Add(-100*time.Millisecond), at.Add(2*time.Second)) {
		t.Fatal("a fire vm-a ran just before it lost its lease is not in doubt")
	}
	if anyInDoubt(spec, "vm-a", at.Add(-10*time.Second), at.Add(-5*time.Second)) {
		t.Fatal("a fire vm-a ran and ran again before it lost its lease is in doubt")
	}
	if anyInDoubt(spec, "vm-c", at, at.Add(time.Second)) {
		t.Fatal("vm-a's loss puts vm-c in doubt")
	}
}
