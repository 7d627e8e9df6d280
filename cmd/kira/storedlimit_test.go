package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
)

// A job under the file limit but over the stored one (JSON writes each '<'
// as \u003c): kira validate, kira apply --dry-run, kira apply and kira run
// --catalog all refuse it with the same figures, and nothing is stored. A
// catalog of 5,000 one-line jobs, over the 1 MiB of the single-key layout,
// validates and is stored.
func TestValidateRefusesWhatRunRefuses(t *testing.T) {
	dir := t.TempDir()
	large := filepath.Join(dir, "large.yaml")
	if err := os.WriteFile(large, []byte("cluster: many\njobs:\n  - name: large\n    schedule: '@hourly'\n    command: [\"true\"]\n    env: {MARKUP: '"+strings.Repeat("<", 200000)+"'}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	env := []string{"KIRA_ETCD_ENDPOINTS=" + ep}
	const refusal = " bytes as stored, over the limit of "
	_, validateErr, code := kiraWith(t, "", nil, "validate", large)
	if code != 1 || !strings.Contains(validateErr, large+":3:") || !strings.Contains(validateErr, "jobs[0]: job large is ") || !strings.Contains(validateErr, refusal+fmt.Sprint(config.MaxTxnBytes)) {
		t.Fatalf("validate: exit %d: %s", code, validateErr)
	}
	figure := validateErr[strings.Index(validateErr, "job large is "):strings.Index(validateErr, refusal)]
	for _, args := range [][]string{
		{"apply", "--dry-run", "-f", large},
		{"apply", "-f", large},
		{"run", "--etcd", ep, "--cluster", "many", "--catalog", large},
	} {
		_, stderr, code := kiraWith(t, "", env, args...)
		if code == 0 || !strings.Contains(stderr, figure+refusal) {
			t.Fatalf("%s: exit %d, want the refusal of validate (%s): %s", args, code, figure, stderr)
		}
	}
	if _, err := config.Read(context.Background(), etcd.Client(t), "many", 0); err == nil {
		t.Fatal("a refused catalog was stored")
	}

	var b strings.Builder
	b.WriteString("cluster: many\njobs:\n")
	for i := range 5000 {
		fmt.Fprintf(&b, "  - {name: customer-%05d, schedule: '@every 1m', handler: noop}\n", i)
	}
	many := filepath.Join(dir, "many.yaml")
	if err := os.WriteFile(many, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := kiraWith(t, "", nil, "validate", many); code != 0 || !strings.Contains(out, "5000 jobs") {
		t.Fatalf("validate of 5,000 jobs: exit %d: %s%s", code, out, stderr)
	}
	if _, stderr, code := kiraWith(t, "", env, "apply", "-f", many); code != 0 {
		t.Fatalf("apply of 5,000 jobs: exit %d: %s", code, stderr)
	}
	if s, err := config.Read(context.Background(), etcd.Client(t), "many", 0); err != nil || len(s.Catalog.Jobs) != 5000 {
		t.Fatalf("5,000 jobs applied, read back: %v", err)
	}
}
