package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// writeDir writes files (name → content) into a new directory.
func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// problemsOf returns the problems of a *config.Error, failing otherwise.
func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("error = %v; want *config.Error", err)
	}
	return cerr.Problems
}

// The directory's catalog is the one file holding everything would give:
// jobs in file-name order, settings from the file that sets them, the
// catalog's notify: as the default of jobs in every file.
func TestDirMergesFiles(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"00-cluster.yaml": "cluster: demo\nmembership:\n  lease_ttl: 6s\nnotify:\n  - {on: [failed], webhook: 'http://127.0.0.1:9/hook'}\n",
		"billing.yaml":    "jobs:\n  - name: reconcile\n    schedule: '0 */5 * * * *'\n    partitions: 12\n    handler: h\n",
		"health.yml":      "jobs:\n  - name: bridge-health\n    schedule: '@every 1s'\n    command: [./check]\n    notify: []\n  - name: cleanup\n    schedule: '@daily'\n    handler: h\n",
		"README.md":       "not a catalog file",
		"old.yaml.bak":    "jobs: [nonsense",
		"sub/other.yaml":  "jobs:\n  - name: not-read\n    schedule: '@daily'\n    handler: h\n",
	})
	got, warnings, err := LoadLintPath(dir)
	if err != nil || len(warnings) != 0 {
		t.Fatalf("LoadLintPath(dir): %v, warnings %v", err, warnings)
	}
	one, err := Parse("all.yaml", []byte(`cluster: demo
membership:
  lease_ttl: 6s
notify:
  - {on: [failed], webhook: 'http://127.0.0.1:9/hook'}
jobs:
  - name: reconcile
    schedule: '0 */5 * * * *'
    partitions: 12
    handler: h
  - name: bridge-health
    schedule: '@every 1s'
    command: [./check]
    notify: []
  - name: cleanup
    schedule: '@daily'
    handler: h
`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, one) {
		t.Fatalf("directory's catalog:\n%+v\nwant the one file's:\n%+v", got, one)
	}
	if got.Membership.LeaseTTL != 6*time.Second || len(got.Jobs[2].Notify) != 1 || len(got.Jobs[1].Notify) != 0 {
		t.Fatalf("settings not applied: %+v", got)
	}
	// A file path still reads one file.
	if cat, _, err := LoadLintPath(filepath.Join(dir, "billing.yaml")); err != nil || len(cat.Jobs) != 1 || cat.Cluster != DefaultCluster {
		t.Fatalf("one file of it: %+v, %v", cat, err)
	}
}

// A job defined twice (in two files or one) and a setting set in two files
// are refused with both locations; nothing is merged.
func TestDirConflicts(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"a.yaml": "cluster: demo\njobs:\n  - name: report\n    schedule: '@daily'\n    handler: h\n",
		"b.yaml": "jobs:\n  - name: other\n    schedule: '@daily'\n    handler: h\n  - name: report\n    schedule: '@hourly'\n    handler: h\n",
		"c.yaml": "\ncluster: demo\n",
	})
	_, _, err := LintDir(dir)
	problems := problemsOf(t, err)
	a, b, c := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml"), filepath.Join(dir, "c.yaml")
	want := []Problem{
		{File: c, Line: 2, Column: 10, Field: "cluster", Message: "cluster is also set in " + a + ":1:10 (cluster): set each catalog setting in one file of the directory"},
	}
	if !reflect.DeepEqual(problems, want) {
		t.Fatalf("problems:\n%v\nwant:\n%v", &Error{Problems: problems}, &Error{Problems: want})
	}
	// With the setting in one file, the duplicate job is what is left.
	os.Remove(c)
	problems = problemsOf(t, func() error { _, _, err := LintDir(dir); return err }())
	want = []Problem{
		{File: b, Line: 5, Column: 11, Field: "jobs[1].name", Message: `duplicate job name "report" (first defined at ` + a + ":3:11 (jobs[0].name))"},
	}
	if !reflect.DeepEqual(problems, want) {
		t.Fatalf("problems:\n%v\nwant:\n%v", &Error{Problems: problems}, &Error{Problems: want})
	}
}

// A problem in any file names that file, the line and the field as written
// in that file; every file's problems are reported at once.
func TestDirProblemsNameTheirFile(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"a.yaml": "jobs:\n  - name: fine\n    schedule: '@daily'\n    handler: h\n",
		"b.yaml": "jobs:\n  - name: ok\n    schedule: '@daily'\n    handler: h\n  - name: bad\n    schedule: '61 * * * *'\n    handler: h\n",
		"c.yml":  "membership:\n  lease_ttl: 1s\n",
	})
	_, _, err := LintDir(dir)
	got := map[string]bool{}
	for _, p := range problemsOf(t, err) {
		got[p.String()[len(dir)+1:]] = true
	}
	for _, w := range []string{
		"b.yaml:6:15: jobs[1].schedule: invalid cron expression",
		"c.yml:2:14: membership.lease_ttl: lease_ttl 1s is under the minimum",
	} {
		found := false
		for g := range got {
			found = found || strings.HasPrefix(g, w)
		}
		if !found {
			t.Errorf("no problem %q in:\n%v", w, err)
		}
	}
	if len(got) != 2 {
		t.Errorf("want 2 problems, got:\n%v", err)
	}

	// Syntax and type errors of several files are all reported.
	dir = writeDir(t, map[string]string{
		"a.yaml": "jobs:\n  - name: a\n   schedule: [\n",
		"b.yaml": "jobs:\n  - name: b\n    schedule: '@daily'\n    partitions: many\n    handler: h\n",
		"c.yaml": "jobs:\n  - name: c\n    schedule: '@daily'\n    handler: h\n",
	})
	_, _, err = LintDir(dir)
	files := map[string]int{}
	for _, p := range problemsOf(t, err) {
		files[filepath.Base(p.File)] = p.Line
	}
	if files["a.yaml"] != 3 || files["b.yaml"] != 4 || len(files) != 2 {
		t.Fatalf("want a.yaml:3 and b.yaml:4, got:\n%v", err)
	}
}

func TestDirWithoutCatalogFiles(t *testing.T) {
	dir := writeDir(t, map[string]string{"notes.txt": "x"})
	problems := problemsOf(t, func() error { _, _, err := LintDir(dir); return err }())
	if len(problems) != 1 || problems[0].File != dir || !strings.Contains(problems[0].Message, "no *.yaml or *.yml") {
		t.Fatalf("got %v", problems)
	}
	// Files without jobs: the problem names the directory.
	dir = writeDir(t, map[string]string{"a.yaml": "cluster: x\n"})
	problems = problemsOf(t, func() error { _, _, err := LintDir(dir); return err }())
	if len(problems) != 1 || problems[0].File != dir || problems[0].Field != "jobs" {
		t.Fatalf("got %v", problems)
	}
}
