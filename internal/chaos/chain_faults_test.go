package chaos

import (
	"syscall"
	"testing"
	"time"
)

// chainJobs is a chain of three jobs, the middle one partitioned:
// chain-a → chain-b (3 partitions) → chain-c. Each writes to the witness,
// so judgeChains sees every logical time each ran, and in which order.
const chainJobs = `  - name: chain-a          # the head of a chain, on a schedule
    schedule: "@every 2s"
    misfire: fire-all
    catchup_window: 2m
    history_limit: 100
    timeout: 5s
    fence_url: "{{W}}/fence"
    http: {url: "{{W}}/write", method: POST}
  - name: chain-b          # after chain-a, each partition once per logical time
    after: [chain-a]
    partitions: 3
    misfire: fire-all
    catchup_window: 2m
    history_limit: 100
    timeout: 5s
    fence_url: "{{W}}/fence"
    http: {url: "{{W}}/write", method: POST}
  - name: chain-c          # after every partition of chain-b
    after: [chain-b]
    misfire: fire-all
    catchup_window: 2m
    history_limit: 100
    timeout: 5s
    fence_url: "{{W}}/fence"
    http: {url: "{{W}}/write", method: POST}
`

// A chain of three jobs through kill -9, SIGSTOP and a cut member, one
// after another: every logical time ran each job once (each partition of
// the middle one), after every partition it runs after, in order
// (judgeChains), beside the usual checks of the other jobs.
func TestChainThroughFaults(t *testing.T) {
	c := newLoadedCluster(t, 3, 0, chainJobs)
	from := windowStart()
	steady(4 * time.Second)

	st := c.waitSettled(3, 30*time.Second)
	victim, id := c.mostSlots(st, "chain-b")
	killed := time.Now()
	victim.signal(t, syscall.SIGKILL)
	c.waitSettled(2, 30*time.Second)
	faults := []Fault{{Name: "kill", Start: killed, Heal: killed, MayDrop: mayDrop, InDoubt: []string{id}}}
	c.restart(victim, 0)
	steady(4 * time.Second)

	st = c.waitSettled(3, time.Minute)
	victim, id = c.mostSlots(st, "chain-c")
	victim.signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	c.waitSettled(2, 30*time.Second)
	time.Sleep(time.Until(stopped.Add(2 * ttl)))
	victim.signal(t, syscall.SIGCONT)
	faults = append(faults, Fault{Name: "pause", Start: stopped, Heal: time.Now(), MayDrop: mayDrop, InDoubt: []string{id}})
	steady(4 * time.Second)

	st = c.waitSettled(3, time.Minute)
	victim, id = c.mostSlots(st, "chain-a")
	cut := time.Now()
	victim.cut()
	time.Sleep(2 * ttl)
	victim.heal()
	faults = append(faults, Fault{Name: "cut", Start: cut, Heal: time.Now(), MayDrop: mayDrop, InDoubt: []string{id}})
	c.waitSettled(3, time.Minute)
	steady(6 * time.Second)

	rep := c.finish("a chain of three jobs through kill -9, SIGSTOP and a cut member", from, faults)
	if rep.Expected == 0 {
		t.Fatal("nothing was judged")
	}
}
