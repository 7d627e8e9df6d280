package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
)

// The job fires on 1 January only: every run in the test is a manual one.
const oneOffCatalog = `cluster: oneoff
membership:
  lease_ttl: 2s
jobs:
  - name: once
    schedule: "0 0 1 1 *"
    command: ["sh", "-c", "echo \"$KIRA_EXECUTION_ID $(date +%%s)\" >> %s"]
`

// triggerID is the execution id kira trigger printed.
func triggerID(t *testing.T, out string) string {
	t.Helper()
	f := strings.Fields(out)
	for i, w := range f {
		if w == "execution_id" && i+1 < len(f) {
			return f[i+1]
		}
	}
	t.Fatalf("no execution id in %q", out)
	return ""
}

// kira trigger --in asks for a run that outlives every member: both
// members stop (one killed, one stopped) before its time, two new ones
// start, and the run happens once, not before its time; a run cancelled
// before its time never runs; a cancel after the run says it ran.
func TestTriggerAtRunsOnceAcrossRestarts(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	dir := t.TempDir()
	log := filepath.Join(dir, "runs.log")
	cat := filepath.Join(dir, "catalog.yaml")
	os.WriteFile(cat, []byte(fmt.Sprintf(oneOffCatalog, log)), 0o600)
	kira := func(args ...string) (string, int) {
		return runKira(t, append(args, "--etcd", ep, "--cluster", "oneoff")...)
	}
	if out, code := kira("apply", "-f", cat); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	first := []*proc{start(t, "run", "--cluster", "oneoff", "--etcd", ep, "--name", "a"), start(t, "run", "--cluster", "oneoff", "--etcd", ep, "--name", "b")}
	kiratest.WaitUntil(t, "the slot owned", 20*time.Second, func() bool {
		st := statusOf(t, ep, "oneoff")
		return len(st.Slots) == 1 && st.Slots[0].Owner != ""
	})

	if out, code := kira("trigger", "once", "--at", "2020-01-01T00:00:00Z"); code != 1 || !strings.Contains(out, "not in the future") {
		t.Fatalf("trigger --at a past time: exit %d\n%s", code, out)
	}
	if out, code := kira("trigger", "once", "--in", "soon"); code != 1 || !strings.Contains(out, "--in \"soon\"") {
		t.Fatalf("trigger --in soon: exit %d\n%s", code, out)
	}
	asked := time.Now()
	out, code := kira("trigger", "once", "--in", "15s")
	if code != 0 || !strings.Contains(out, " at ") {
		t.Fatalf("trigger --in: exit %d\n%s", code, out)
	}
	id := triggerID(t, out)
	out, code = kira("trigger", "once", "--in", "10s")
	if code != 0 {
		t.Fatalf("trigger --in: exit %d\n%s", code, out)
	}
	cancelled := triggerID(t, out)
	if out, code := kira("trigger", "--cancel", cancelled, "--in", "1h"); code != 1 || !strings.Contains(out, "takes no --at") {
		t.Fatalf("trigger --cancel --in: exit %d\n%s", code, out)
	}
	if out, code := kira("trigger", "--cancel", cancelled); code != 0 || !strings.Contains(out, "cancelled once/0 execution_id "+cancelled) {
		t.Fatalf("trigger --cancel: exit %d\n%s", code, out)
	}
	// kira jobs JOB and kira next list the waiting run, not the cancelled one.
	if out, code := kira("jobs", "once"); code != 0 || !strings.Contains(out, "waiting runs") || !strings.Contains(out, id) || strings.Contains(out, cancelled) {
		t.Fatalf("jobs once: exit %d\n%s", code, out)
	}
	if out, code := kira("next", "once", "-n", "2"); code != 0 || !strings.Contains(out, "one-off "+id+" (partition 0)") || !strings.Contains(out, "schedule") {
		t.Fatalf("next once: exit %d\n%s", code, out)
	}

	// Every member goes before the run's time; new ones come.
	first[0].Signal(syscall.SIGKILL)
	if code := first[1].Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	kiratest.Receive(t, first[0].Done(), 10*time.Second, "the killed member to exit")
	start(t, "run", "--cluster", "oneoff", "--etcd", ep, "--name", "c")
	start(t, "run", "--cluster", "oneoff", "--etcd", ep, "--name", "d")
	restarted := time.Since(asked)
	if restarted > 14*time.Second {
		t.Logf("the members restarted %s after the request: the run may have been due before they did", restarted)
	}

	var lines []string
	kiratest.WaitUntil(t, "the one-off run", 40*time.Second, func() bool {
		data, _ := os.ReadFile(log)
		lines = strings.Split(strings.TrimSpace(string(data)), "\n")
		return len(data) > 0
	})
	time.Sleep(3 * time.Second) // a duplicate would come right behind
	data, _ := os.ReadFile(log)
	lines = strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], id+" ") {
		t.Fatalf("runs %q; want %s once (and never %s)", lines, id, cancelled)
	}
	var ranAt int64
	fmt.Sscanf(strings.Fields(lines[0])[1], "%d", &ranAt)
	if due := asked.Add(15 * time.Second).Truncate(time.Second); time.Unix(ranAt, 0).Before(due) {
		t.Fatalf("ran at %s, before its time %s", time.Unix(ranAt, 0), due)
	}
	kiratest.WaitUntil(t, "the run's record", 20*time.Second, func() bool {
		out, code := kira("trigger", "--cancel", id)
		return code == 1 && strings.Contains(out, "already ran: succeeded")
	})
	if out, code := kira("trigger", "--cancel", cancelled); code != 1 || !strings.Contains(out, "not cancelled") {
		t.Fatalf("second cancel: exit %d\n%s", code, out)
	}
}

// kira validate --next shows an @at job's one fire, in its zone and in
// UTC; a past @at is refused with file, line and field, and is a warning
// under misfire: fire-once.
func TestValidateAt(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "at.yaml")
	write := func(at, extra string) {
		os.WriteFile(file, []byte("cluster: at\njobs:\n  - name: once\n    schedule: \"@at "+at+"\"\n    timezone: Europe/Istanbul\n    command: [\"true\"]\n"+extra), 0o600)
	}
	write("2099-01-01T09:00:00+03:00", "")
	out, code := runKira(t, "validate", file, "--next", "3") // the schedule, and its one fire in two zones
	if code != 0 || !strings.Contains(out, "2099-01-01 09:00:00 +03") || !strings.Contains(out, "2099-01-01T06:00:00Z") || strings.Count(out, "2099-") != 3 {
		t.Fatalf("validate --next of a future @at: exit %d\n%s", code, out)
	}
	write("2020-01-01T09:00:00+03:00", "")
	if out, code := runKira(t, "validate", file); code != 1 || !strings.Contains(out, file+":4:") || !strings.Contains(out, "jobs[0].schedule") || !strings.Contains(out, "is past") {
		t.Fatalf("validate of a past @at: exit %d\n%s", code, out)
	}
	write("2020-01-01T09:00:00+03:00", "    misfire: fire-once\n")
	if out, code := runKira(t, "validate", file, "--next", "3"); code != 0 || !strings.Contains(out, "warning: "+file+":4:") {
		t.Fatalf("validate of a past @at under fire-once: exit %d\n%s", code, out)
	}
}

// A one-off run whose member is killed mid-run is in doubt: the member
// that takes the slot over runs it again, with the same execution id, as
// attempt 2 (trigger retry), and the history keeps that run's record.
func TestTriggerAtInDoubtRerunsAfterKill(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	dir := t.TempDir()
	log := filepath.Join(dir, "runs.log")
	cat := filepath.Join(dir, "catalog.yaml")
	os.WriteFile(cat, []byte(fmt.Sprintf(`cluster: indoubt
membership:
  lease_ttl: 2s
jobs:
  - name: once
    schedule: "0 0 1 1 *"
    command: ["sh", "-c", "echo \"$KIRA_EXECUTION_ID start\" >> %s; sleep 4"]
`, log)), 0o600)
	kira := func(args ...string) (string, int) {
		return runKira(t, append(args, "--etcd", ep, "--cluster", "indoubt")...)
	}
	if out, code := kira("apply", "-f", cat); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	a := start(t, "run", "--cluster", "indoubt", "--etcd", ep, "--name", "a")
	kiratest.WaitUntil(t, "the slot owned", 20*time.Second, func() bool {
		st := statusOf(t, ep, "indoubt")
		return len(st.Slots) == 1 && st.Slots[0].Owner != ""
	})
	out, code := kira("trigger", "once", "--in", "2s")
	if code != 0 {
		t.Fatalf("trigger --in: exit %d\n%s", code, out)
	}
	id := triggerID(t, out)
	starts := func() int {
		data, _ := os.ReadFile(log)
		return strings.Count(string(data), id+" start")
	}
	kiratest.WaitUntil(t, "the run started", 20*time.Second, func() bool { return starts() == 1 })
	a.Signal(syscall.SIGKILL)
	kiratest.Receive(t, a.Done(), 10*time.Second, "the killed member to exit")
	start(t, "run", "--cluster", "indoubt", "--etcd", ep, "--name", "b")
	kiratest.WaitUntil(t, "the retry's record", 40*time.Second, func() bool {
		out, code := kira("history", "once", "-o", "json")
		return code == 0 && strings.Contains(out, `"execution_id": "`+id+`"`) && strings.Contains(out, `"attempt": 2`) && strings.Contains(out, `"trigger": "retry"`)
	})
	if n := starts(); n != 2 {
		t.Fatalf("%s started %d times; want twice (the killed member's, and the retry)", id, n)
	}
	if out, code := kira("trigger", "--cancel", id); code != 1 || !strings.Contains(out, "already ran: succeeded") {
		t.Fatalf("cancel after the retry: exit %d\n%s", code, out)
	}
}
