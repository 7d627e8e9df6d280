package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/internal/etcdtest"
)

// manyJobs is a catalog of n single-slot jobs of one line each, as a team
// with one schedule per customer writes it.
func manyJobs(n int) []byte {
	var b strings.Builder
	b.WriteString("cluster: c\njobs:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: customer-%05d, schedule: '@every 1m', handler: noop}\n", i)
	}
	return []byte(b.String())
}

// largeJob is a catalog whose file is under the limit but whose second job
// is over it as stored: JSON writes each '<' of its environment as \u003c.
func largeJob() []byte {
	return []byte("cluster: c\njobs:\n  - {name: small, schedule: '@hourly', handler: noop}\n" +
		"  - name: large\n    schedule: '@hourly'\n    command: [\"true\"]\n    env: {MARKUP: '" + strings.Repeat("<", 200000) + "'}\n")
}

// The validator refuses what the store refuses, with the store's own
// figures, located at the job, for a file and a directory; the store,
// given such a catalog anyway, refuses it alike. Both take a catalog of
// 5,000 one-line jobs, over the 1 MiB of the single-key layout.
func TestValidatorRefusesWhatStoreRefuses(t *testing.T) {
	data := largeJob()
	if len(data) > MaxCatalogBytes {
		t.Fatalf("the file is %d bytes: the test needs one under the file limit", len(data))
	}
	_, _, err := Lint("large.yaml", data)
	var invalid *Error
	if !errors.As(err, &invalid) || len(invalid.Problems) != 1 {
		t.Fatalf("a job over the stored limit passed validation: %v", err)
	}
	cat := unchecked(t, data)
	size := storedSize(t, storedJob{Position: 2 * positionStride, Job: cat.Jobs[1], Manager: ManagerApply})
	want := fmt.Sprintf("jobs[1]: job large is %d bytes as stored, over the limit of %d (etcd refuses larger requests)", size, MaxTxnBytes)
	if got := invalid.Problems[0].String(); !strings.HasPrefix(got, "large.yaml:4:") || !strings.HasSuffix(got, want) {
		t.Fatalf("validation said\n%s\nwant\n%s", got, want)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "jobs.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LintDir(dir); err == nil || !strings.Contains(err.Error(), "jobs.yaml:4:") || !strings.Contains(err.Error(), "jobs[1]: job large is ") {
		t.Fatalf("a directory with a job over the stored limit: %v", err)
	}

	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	if _, _, err := Store(ctx, cli, cat); err == nil || err.Error() != "config: "+invalid.Problems[0].Message {
		t.Fatalf("the store said %v, the validator %q", err, invalid.Problems[0].Message)
	}
	if _, err := Apply(ctx, cli, cat, Source{By: ByApply}, false, false); err == nil || err.Error() != "config: "+invalid.Problems[0].Message {
		t.Fatalf("apply of a job over the stored limit: %v", err)
	}

	many, err := Parse("many.yaml", manyJobs(5000))
	if err != nil {
		t.Fatalf("5,000 one-line jobs: %v", err)
	}
	if _, _, err := Store(ctx, cli, many); err != nil {
		t.Fatalf("5,000 one-line jobs, valid, were not stored: %v", err)
	}
}

// storedSize is the size of j as the store encodes it.
func storedSize(t *testing.T, j storedJob) int {
	t.Helper()
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// unchecked is the catalog of data validated in every way but its stored
// size, as the store would be given it by a caller that skipped validation.
func unchecked(t *testing.T, data []byte) *Catalog {
	t.Helper()
	raw, doc, err := decode("large.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	v := validator{locate: doc.locator("large.yaml")}
	cat := v.catalog(raw)
	if len(v.problems) > 0 {
		t.Fatal(v.problems)
	}
	return cat
}
