package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/api"
	"github.com/kira-scheduler/kira/internal/etcdtest"
)

// jobEnv is the environment of kira job in the tests: the etcd, cluster m,
// and the user ana, whose manager is cli:ana@<host>.
func jobEnv(t *testing.T) (env []string, manager string) {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	etcd := etcdtest.Start(t)
	env = []string{"KIRA_ETCD_ENDPOINTS=" + etcd.Endpoints()[0], "KIRA_CLUSTER=m", "USER=ana"}
	if _, stderr, code := kiraWith(t, catalogOf("m", "a", ""), env, "apply", "-f", "-"); code != 0 {
		t.Fatalf("apply: exit %d: %s", code, stderr)
	}
	return env, "cli:ana@" + host
}

// kiraJob runs kira job ARGS and fails the test unless it exits want.
func kiraJob(t *testing.T, env []string, stdin string, want int, args ...string) (stdout, stderr string) {
	t.Helper()
	stdout, stderr, code := kiraWith(t, stdin, env, append([]string{"job"}, args...)...)
	if code != want {
		t.Fatalf("kira job %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, stdout, stderr)
	}
	return stdout, stderr
}

// revisionOf is the revision kira job put printed.
func revisionOf(t *testing.T, out string) int64 {
	t.Helper()
	var rev int64
	m := regexp.MustCompile(`at revision (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no revision in %q", out)
	}
	fmt.Sscan(m[1], &rev)
	return rev
}

// kira job put creates a job from a file named by its name:; kira job get
// writes it with its revision and manager; the edited text put back with
// --if-revision file replaces it, and the stale text is then refused with
// the revision stored and what changed; the same text again is unchanged;
// kira catalog shows the job's manager; -o json answers as the API does.
func TestJobCommandsRoundTrip(t *testing.T) {
	env, manager := jobEnv(t)
	dir := t.TempDir()
	b := writeFile(t, dir, "b.yaml", "name: b\nschedule: '@hourly'\ncommand: [\"true\"]\n")
	out, _ := kiraJob(t, env, "", 0, "put", "-f", b)
	if !strings.HasPrefix(out, "job b created at revision ") || !strings.Contains(out, "(manager "+manager+")") {
		t.Fatalf("put of a new job: %s", out)
	}
	created := revisionOf(t, out)
	got, _ := kiraJob(t, env, "", 0, "get", "b")
	if want := fmt.Sprintf("# revision: %d\n# manager: %s\nname: b\nschedule: \"@hourly\"\n", created, manager); !strings.HasPrefix(got, want) {
		t.Fatalf("get -o yaml:\n%s\nwant it to start:\n%s", got, want)
	}
	edited := writeFile(t, dir, "edited.yaml", strings.Replace(got, "@hourly", "@daily", 1))
	out, _ = kiraJob(t, env, "", 0, "put", "b", "-f", edited, "--if-revision", "file")
	if !strings.HasPrefix(out, "job b replaced at revision ") {
		t.Fatalf("put of the edited job: %s", out)
	}
	replaced := revisionOf(t, out)
	stale := writeFile(t, dir, "stale.yaml", strings.Replace(got, "@hourly", "@weekly", 1))
	_, stderr := kiraJob(t, env, "", 1, "put", "-f", stale, "--if-revision", "file")
	if !strings.Contains(stderr, fmt.Sprintf("job b is at revision %d, not %d", replaced, created)) || !strings.Contains(stderr, "schedule: @hourly → @daily") || !strings.Contains(stderr, "nothing written") {
		t.Fatalf("put of a stale job: %s", stderr)
	}
	if out, _ := kiraJob(t, env, "", 0, "put", "-f", edited); !strings.Contains(out, fmt.Sprintf("job b unchanged (revision %d", replaced)) {
		t.Fatalf("put of the stored job again: %s", out)
	}
	var def api.JobDefinition
	var spec struct{ Schedule string }
	if out, _ := kiraJob(t, env, "", 0, "get", "b", "-o", "json"); json.Unmarshal([]byte(out), &def) != nil || json.Unmarshal(def.Job, &spec) != nil ||
		def.Revision != replaced || def.Manager != manager || spec.Schedule != "@daily" || def.CatalogRevision < replaced {
		t.Fatalf("get -o json: %s", out)
	}
	if out, _, _ := kiraWith(t, "", env, "catalog"); !strings.Contains(out, fmt.Sprintf("# job b: managed by %s, revision %d", manager, replaced)) {
		t.Fatalf("kira catalog:\n%s", out)
	}
	var written api.JobWritten
	job := "schedule: '@daily'\ncommand: [\"true\"]\n"
	if out, _ := kiraJob(t, env, job, 0, "put", "c", "-f", "-", "--create-only", "-o", "json"); json.Unmarshal([]byte(out), &written) != nil || !written.Created || written.Manager != manager {
		t.Fatalf("put --create-only of a new job: %s", out)
	}
	if _, stderr := kiraJob(t, env, job, 1, "put", "c", "-f", "-", "--create-only"); !strings.Contains(stderr, fmt.Sprintf("job c exists (revision %d) and --create-only was given", written.Revision)) {
		t.Fatalf("put --create-only of a stored job: %s", stderr)
	}
}

// A job kira apply manages is the CLI's only with --force, which says whose
// it was; the manager is the etcd --user's when given, and another user's
// job a conflict; a job others run after is not deleted, which names them; a
// delete at a stale revision is refused; a deleted job is gone.
func TestJobCommandsTakeOverAndDelete(t *testing.T) {
	env, manager := jobEnv(t)
	job := "schedule: '@daily'\ncommand: [\"true\"]\n"
	if _, stderr := kiraJob(t, env, job, 1, "put", "a", "-f", "-"); !strings.Contains(stderr, "job a is managed by apply, not "+manager) || !strings.Contains(stderr, "--force takes it over") {
		t.Fatalf("put of kira apply's job: %s", stderr)
	}
	var written api.JobWritten
	if out, _ := kiraJob(t, env, job, 0, "put", "a", "-f", "-", "--force", "-o", "json"); json.Unmarshal([]byte(out), &written) != nil || written.Previous != "apply" || written.Manager != manager {
		t.Fatalf("put --force: %s", out)
	}
	if out, _, _ := kiraWith(t, "", env, "catalog"); !strings.Contains(out, "# job a: managed by "+manager) {
		t.Fatalf("kira catalog after the take-over:\n%s", out)
	}
	if out, _ := kiraJob(t, env, job, 0, "put", "e", "-f", "-", "--user", "bob:secret"); !strings.Contains(out, "(manager cli:bob)") {
		t.Fatalf("put as etcd user bob: %s", out)
	}
	if _, stderr := kiraJob(t, env, job+"jitter: 1s\n", 1, "put", "e", "-f", "-"); !strings.Contains(stderr, "job e is managed by cli:bob, not "+manager) {
		t.Fatalf("put of another user's job: %s", stderr)
	}
	kiraJob(t, env, "command: [\"true\"]\nafter: [a]\n", 0, "put", "d1", "-f", "-")
	kiraJob(t, env, "command: [\"true\"]\nafter: [a]\n", 0, "put", "d2", "-f", "-")
	if _, stderr := kiraJob(t, env, "", 1, "delete", "a"); !strings.Contains(stderr, "job a cannot be deleted: d1, d2 run after it") {
		t.Fatalf("delete of a job others run after: %s", stderr)
	}
	kiraJob(t, env, "", 0, "delete", "d2")
	if _, stderr := kiraJob(t, env, "", 1, "delete", "d1", "--if-revision", "1"); !strings.Contains(stderr, "not 1 (--if-revision)") {
		t.Fatalf("delete at a stale revision: %s", stderr)
	}
	if out, _ := kiraJob(t, env, "", 0, "delete", "d1"); !strings.HasPrefix(out, "job d1 deleted at catalog revision ") {
		t.Fatalf("delete: %s", out)
	}
	if out, _ := kiraJob(t, env, "", 0, "delete", "a", "--if-revision", fmt.Sprint(written.Revision)); !strings.HasPrefix(out, "job a deleted") {
		t.Fatalf("delete at its revision: %s", out)
	}
	if _, stderr := kiraJob(t, env, "", 1, "get", "a"); !strings.Contains(stderr, `cluster "m" has no job "a"`) {
		t.Fatalf("get of a deleted job: %s", stderr)
	}
}

// An invalid job is refused with each problem at the -f file's line and
// field, an after: target that is not stored included; a file without
// name: and no JOB, and --if-revision file of a file without the comment,
// say what to give; nothing is written.
func TestJobCommandsRefuse(t *testing.T) {
	env, _ := jobEnv(t)
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", "name: x\nschedule: bogus\ncommand: [\"true\"]\npartitions: 0\n")
	_, stderr := kiraJob(t, env, "", 1, "put", "-f", bad)
	if !strings.Contains(stderr, bad+":2:11: schedule: ") || !strings.Contains(stderr, bad+":4:13: partitions: ") {
		t.Fatalf("put of an invalid job: %s", stderr)
	}
	after := writeFile(t, dir, "after.json", "{\"command\": [\"true\"],\n \"after\": [\"a\", \"zz\"]}\n")
	if _, stderr := kiraJob(t, env, "", 1, "put", "x", "-f", after); !strings.Contains(stderr, after+`:2:17: after[1]: job "x" runs after "zz", which is not a job of the catalog`) {
		t.Fatalf("put after a job that is not stored: %s", stderr)
	}
	broken := writeFile(t, dir, "broken.yaml", "schedule: \"bogus\ncommand: [\"true\"]\n")
	if _, stderr := kiraJob(t, env, "", 1, "put", "-f", broken); !strings.Contains(stderr, broken+":2:") {
		t.Fatalf("put of a file that is not YAML: %s", stderr)
	}
	unnamed := writeFile(t, dir, "unnamed.yaml", "schedule: '@daily'\ncommand: [\"true\"]\n")
	if _, stderr := kiraJob(t, env, "", 1, "put", "-f", unnamed); !strings.Contains(stderr, "has no name: field: give the job's name (kira job put JOB -f "+unnamed) {
		t.Fatalf("put without a name: %s", stderr)
	}
	if _, stderr := kiraJob(t, env, "", 1, "put", "x", "-f", unnamed, "--if-revision", "file"); !strings.Contains(stderr, `starts with no "# revision: N" comment line`) {
		t.Fatalf("--if-revision file of a file without the comment: %s", stderr)
	}
	if _, stderr := kiraJob(t, env, "", 1, "put", "x", "-f", unnamed, "--if-revision", "3", "--create-only"); !strings.Contains(stderr, "exclude each other") {
		t.Fatalf("--if-revision with --create-only: %s", stderr)
	}
	if _, stderr := kiraJob(t, env, "", 1, "put", "x", "-f", unnamed, "--if-revision", "3"); !strings.Contains(stderr, "job x is not stored, and --if-revision 3 was given") {
		t.Fatalf("--if-revision of a job not stored: %s", stderr)
	}
	if _, stderr := kiraJob(t, env, "", 1, "put", "x", "-f", filepath.Join(dir, "none.yaml")); !strings.Contains(stderr, "none.yaml: no such file") {
		t.Fatalf("put of a file that does not exist: %s", stderr)
	}
	if out, _, _ := kiraWith(t, "", env, "catalog", "-o", "json"); strings.Contains(out, `"job": "x"`) {
		t.Fatalf("a refused put wrote job x:\n%s", out)
	}
	if _, stderr, code := kiraWith(t, "", env, "job", "list"); code != 2 || !strings.Contains(stderr, `unknown command "list"`) {
		t.Fatalf("kira job list: exit %d: %s", code, stderr)
	}
}
