package main

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"sigs.k8s.io/yaml"
)

// kiraWith runs the binary with stdin and extra environment variables, and
// returns its standard output, standard error and exit code.
func kiraWith(t *testing.T, stdin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(kiraBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

const dayTwoCatalog = `cluster: daytwo
membership: {lease_ttl: 2s}
jobs:
  - {name: ok, schedule: "@every 1s", partitions: 2, command: ["true"]}
  - {name: broken, schedule: "@every 1s", command: ["sh", "-c", "echo boom; exit 3"]}
  - {name: nightly, schedule: "30 2 * * *", timezone: America/New_York, command: ["true"]}
`

// The commands of day two, as a user runs them against a running member:
// kira jobs (and JOB), kira catalog round-tripping through kira diff and
// kira apply -f -, kira history --outcome with its exit code, flags from
// KIRA_* variables, -h and shell completion.
func TestDayTwoCommands(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	env := []string{"KIRA_ETCD_ENDPOINTS=" + ep, "KIRA_CLUSTER=daytwo"}
	if _, stderr, code := kiraWith(t, dayTwoCatalog, env, "apply", "-f", "-"); code != 0 {
		t.Fatalf("apply -f -: exit %d: %s", code, stderr)
	}
	start(t, "run", "--etcd", ep, "--cluster", "daytwo")

	dayTwoJobs(t, env)
	dayTwoHistory(t, env)
	stored := dayTwoCatalogAndDiff(t, env)
	dayTwoOutputs(t, env, stored)
	dayTwoEnvironment(t, env)
	dayTwoHelpAndCompletion(t, env)
}

// dayTwoJobs: kira jobs and kira jobs JOB, in JSON, YAML and a table.
func dayTwoJobs(t *testing.T, env []string) {
	t.Helper()
	var jobsOut []map[string]any
	kiratest.WaitUntil(t, "kira jobs to show every slot led and a last fire", 20*time.Second, func() bool {
		out, _, code := kiraWith(t, "", env, "jobs", "-o", "json")
		if code != 0 || json.Unmarshal([]byte(out), &jobsOut) != nil || len(jobsOut) != 3 {
			return false
		}
		return jobsOut[0]["slots_led"] == float64(2) && jobsOut[0]["last_fire"] != nil && jobsOut[1]["last_fire"] != nil
	})
	for _, field := range []string{"name", "schedule", "timezone", "partitions", "paused", "slots_led", "last_fire", "next_fire"} {
		if _, ok := jobsOut[2][field]; !ok {
			t.Errorf("kira jobs -o json: %q absent from %v", field, jobsOut[2])
		}
	}
	out, _, _ := kiraWith(t, "", env, "jobs")
	if !strings.Contains(out, "America/New_York") || !strings.Contains(out, "2/2") {
		t.Errorf("kira jobs table:\n%s", out)
	}
	out, _, code := kiraWith(t, "", env, "jobs", "ok", "-o", "yaml")
	var detail struct {
		Slots []struct {
			Partition int        `json:"partition"`
			Owner     string     `json:"owner"`
			Token     int64      `json:"token"`
			NextFire  *time.Time `json:"next_fire"`
		} `json:"slots"`
	}
	if code != 0 || yaml.Unmarshal([]byte(out), &detail) != nil || len(detail.Slots) != 2 || detail.Slots[1].Owner == "" || detail.Slots[1].NextFire == nil {
		t.Fatalf("kira jobs ok -o yaml: exit %d\n%s", code, out)
	}

}

// dayTwoHistory: kira history --outcome: failures only, with the exit code, every field present.
func dayTwoHistory(t *testing.T, env []string) {
	t.Helper()
	var recs []map[string]any
	kiratest.WaitUntil(t, "a failure in the history", 20*time.Second, func() bool {
		out, _, code := kiraWith(t, "", env, "history", "broken", "--outcome", "failed", "-o", "json")
		return code == 0 && json.Unmarshal([]byte(out), &recs) == nil && len(recs) > 0
	})
	for _, r := range recs {
		if r["outcome"] != "failed" || r["exit_code"] != float64(3) || r["http_status"] != nil || r["output_tail"] != "boom\n" {
			t.Fatalf("history --outcome failed: %v", r)
		}
	}
	if out, _, _ := kiraWith(t, "", env, "history", "ok", "--outcome", "failed", "-o", "json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("history of a job that never fails, --outcome failed: %s", out)
	}
	if _, stderr, code := kiraWith(t, "", env, "history", "ok", "--outcome", "bad"); code != 1 || !strings.Contains(stderr, "must be one of") {
		t.Fatalf("--outcome bad: exit %d: %s", code, stderr)
	}
	for _, cmd := range []string{"history", "trigger", "next"} {
		if _, stderr, code := kiraWith(t, "", env, cmd, "ok", "--partition", "2"); code != 1 || !strings.Contains(stderr, "job ok has partitions 0 to 1; --partition 2 does not exist") {
			t.Fatalf("%s --partition 2 of a job of two: exit %d: %s", cmd, code, stderr)
		}
	}

}

// dayTwoCatalogAndDiff: kira catalog round-trips through kira diff -f - (exit 0, 1, 2); it returns the stored text.
func dayTwoCatalogAndDiff(t *testing.T, env []string) string {
	t.Helper()
	stored, _, code := kiraWith(t, "", env, "catalog")
	if code != 0 || !strings.Contains(stored, "# cluster daytwo, stored at etcd revision") {
		t.Fatalf("kira catalog: exit %d\n%s", code, stored)
	}
	if out, stderr, code := kiraWith(t, stored, env, "diff", "-f", "-"); code != 0 || out != "" {
		t.Fatalf("diff of the stored catalog: exit %d\n%s%s", code, out, stderr)
	}
	changed := strings.Replace(stored, "schedule: 30 2 * * *", "schedule: 45 2 * * *", 1)
	if changed == stored {
		t.Fatalf("the stored catalog has no nightly schedule line:\n%s", stored)
	}
	out, _, code := kiraWith(t, changed, env, "diff", "-f", "-")
	if code != 1 || !strings.Contains(out, "-    schedule: 30 2 * * *") || !strings.Contains(out, "+    schedule: 45 2 * * *") {
		t.Fatalf("diff of a change: exit %d\n%s", code, out)
	}
	if _, stderr, code := kiraWith(t, "cluster: daytwo\njobs: []\n", env, "diff", "-f", "-"); code != 2 || !strings.Contains(stderr, "<stdin>") {
		t.Fatalf("diff of a broken catalog: exit %d: %s", code, stderr)
	}
	var js struct {
		Revision int64          `json:"revision"`
		Catalog  map[string]any `json:"catalog"`
	}
	out, _, _ = kiraWith(t, "", env, "catalog", "-o", "json")
	if json.Unmarshal([]byte(out), &js) != nil || js.Revision == 0 || js.Catalog["cluster"] != "daytwo" {
		t.Fatalf("kira catalog -o json:\n%s", out)
	}

	return stored
}

// dayTwoOutputs: every command that prints takes -o json|yaml.
func dayTwoOutputs(t *testing.T, env []string, stored string) {
	t.Helper()
	var trig []map[string]any
	if out, _, code := kiraWith(t, "", env, "trigger", "ok", "-o", "json"); code != 0 || json.Unmarshal([]byte(out), &trig) != nil || len(trig) != 2 || trig[1]["partition"] != float64(1) || !strings.HasPrefix(trig[1]["execution_id"].(string), "manual-") {
		t.Fatalf("trigger -o json: exit %d\n%s", code, out)
	}
	var paused struct {
		Job    string `json:"job"`
		Paused bool   `json:"paused"`
	}
	if out, _, code := kiraWith(t, "", env, "pause", "nightly", "-o", "yaml"); code != 0 || yaml.Unmarshal([]byte(out), &paused) != nil || paused.Job != "nightly" || !paused.Paused {
		t.Fatalf("pause -o yaml: exit %d\n%s", code, out)
	}
	var applied map[string]any
	if out, _, code := kiraWith(t, stored, env, "apply", "-f", "-", "-o", "json"); code != 0 || json.Unmarshal([]byte(out), &applied) != nil || applied["written"] != false || len(applied["changes"].([]any)) != 0 {
		t.Fatalf("apply -o json of the stored catalog: exit %d\n%s", code, out)
	}
	var valid map[string]any
	if out, _, code := kiraWith(t, "", nil, "validate", "--next", "2", "-o", "json", "../../examples/catalog.yaml"); code != 0 || json.Unmarshal([]byte(out), &valid) != nil || valid["slots"] != float64(5) || len(valid["next"].(map[string]any)) != 2 {
		t.Fatalf("validate -o json: exit %d\n%s", code, out)
	}

}

// dayTwoEnvironment: a flag on the command line wins over its KIRA_* variable; a bad value names it.
func dayTwoEnvironment(t *testing.T, env []string) {
	t.Helper()
	var recs []map[string]any
	if _, stderr, code := kiraWith(t, "", append(env, "KIRA_HISTORY_LIMIT=x"), "history", "ok"); code != 1 || !strings.Contains(stderr, "$KIRA_HISTORY_LIMIT") {
		t.Fatalf("bad KIRA_HISTORY_LIMIT: exit %d: %s", code, stderr)
	}
	out, _, _ := kiraWith(t, "", append(env, "KIRA_HISTORY_LIMIT=1", "KIRA_HISTORY_OUTPUT=json"), "history", "ok")
	if json.Unmarshal([]byte(out), &recs) != nil || len(recs) != 1 {
		t.Fatalf("KIRA_HISTORY_LIMIT=1 KIRA_HISTORY_OUTPUT=json: %s", out)
	}
	kiratest.WaitUntil(t, "-n 3 to win over KIRA_HISTORY_LIMIT=1", 20*time.Second, func() bool {
		out, _, _ = kiraWith(t, "", append(env, "KIRA_HISTORY_LIMIT=1"), "history", "ok", "-n", "3", "-o", "json")
		return json.Unmarshal([]byte(out), &recs) == nil && len(recs) == 3
	})
}

// dayTwoHelpAndCompletion: -h exits 0 with --double-dashed flags; completion completes job names.
func dayTwoHelpAndCompletion(t *testing.T, env []string) {
	t.Helper()
	for _, args := range [][]string{{"-h"}, {"history", "--help"}, {"run", "-h"}} {
		if out, _, code := kiraWith(t, "", nil, args...); code != 0 || !strings.Contains(out, "--etcd") {
			t.Fatalf("%v: exit %d\n%s", args, code, out)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if out, _, code := kiraWith(t, "", nil, "completion", shell); code != 0 || !strings.Contains(out, "kira") {
			t.Fatalf("completion %s: exit %d", shell, code)
		}
	}
	if out, _, _ := kiraWith(t, "", env, "__complete", "pause", ""); !strings.Contains(out, "nightly") || !strings.Contains(out, "broken") {
		t.Fatalf("completion of pause JOB:\n%s", out)
	}
}

// The embedded etcd's port taken: kira run and kira etcd say which address
// and which flag moves it.
func TestPortTakenIsExplained(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := "http://" + l.Addr().String()
	dir := t.TempDir()
	_, stderr, code := kiraWith(t, "", nil, "run", "--catalog", "../../examples/catalog.yaml", "--data-dir", filepath.Join(dir, "run"),
		"--embedded-client-url", taken, "--embedded-peer-url", "http://"+etcdtest.FreeAddr(t))
	if code != 1 || !strings.Contains(stderr, l.Addr().String()+" is taken") || !strings.Contains(stderr, "--embedded-client-url") || !strings.Contains(stderr, "--etcd") {
		t.Fatalf("kira run on a taken port: exit %d: %s", code, stderr)
	}
	_, stderr, code = kiraWith(t, "", nil, "etcd", "--data-dir", filepath.Join(dir, "etcd"), "--listen-client-urls", taken,
		"--listen-peer-urls", "http://"+etcdtest.FreeAddr(t))
	if code != 1 || !strings.Contains(stderr, l.Addr().String()+" is taken") || !strings.Contains(stderr, "--listen-client-urls") {
		t.Fatalf("kira etcd on a taken port: exit %d: %s", code, stderr)
	}
}

// A journal of no keys is refused before anything starts, naming the flag.
func TestJournalEntriesMustBePositive(t *testing.T) {
	_, stderr, code := kiraWith(t, "", nil, "run", "--catalog", "../../examples/catalog.yaml", "--data-dir", t.TempDir(), "--journal-entries", "0")
	if code != 1 || !strings.Contains(stderr, "--journal-entries 0") {
		t.Fatalf("kira run --journal-entries 0: exit %d: %s", code, stderr)
	}
}

// A member of an external etcd without --data-dir keeps its high-water mark
// in memory only, and says so at start: after a restart it could not tell
// an etcd restored without --bump-revision (docs/operations.md).
func TestExternalEtcdWithoutADataDirWarns(t *testing.T) {
	etcd := etcdtest.Start(t)
	p := etcdtest.StartProcess(t, kiraBin, "run", "--catalog", "../../examples/catalog.yaml", "--etcd", etcd.Endpoints()[0])
	kiratest.WaitUntil(t, "the member to join", 30*time.Second, func() bool { return strings.Contains(p.Output(), "msg=joined") || p.Exited() })
	if p.Exited() || !strings.Contains(p.Output(), "high-water mark") || !strings.Contains(p.Output(), "kept in memory only") {
		t.Fatalf("kira run --etcd without --data-dir:\n%s", p.Output())
	}
}
