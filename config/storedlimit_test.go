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

	"github.com/kira-scheduler/kira/etcdtest"
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

// The validator refuses a catalog whose file is under the limit but whose
// stored form is over it, with the store's own message, for a file and a
// directory; the store, given the catalog anyway, refuses it with the same
// message; a catalog under the stored limit passes both.
func TestValidatorRefusesWhatStoreRefuses(t *testing.T) {
	big := manyJobs(5000)
	if len(big) > MaxCatalogBytes {
		t.Fatalf("the file is %d bytes: the test needs one under the file limit", len(big))
	}
	_, _, err := Lint("big.yaml", big)
	var invalid *Error
	if !errors.As(err, &invalid) || len(invalid.Problems) != 1 {
		t.Fatalf("a catalog over the stored limit passed validation: %v", err)
	}
	msg := invalid.Problems[0].String()
	want := fmt.Sprintf("big.yaml: the catalog is %d bytes as stored, over the limit of %d", storedSize(t, big), MaxCatalogBytes)
	if !strings.HasPrefix(msg, want) {
		t.Fatalf("validation said %q, want it to start with %q", msg, want)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "jobs.yaml"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LintDir(dir); err == nil || !strings.Contains(err.Error(), dir+": the catalog is ") || !strings.Contains(err.Error(), "as stored, over the limit") {
		t.Fatalf("a directory over the stored limit: %v", err)
	}

	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	cat := unchecked(t, big)
	if _, _, err := Store(ctx, cli, cat); err == nil || err.Error() != "config: "+invalid.Problems[0].Message {
		t.Fatalf("the store said %v, the validator %q", err, invalid.Problems[0].Message)
	}
	if _, err := Apply(ctx, cli, cat, Source{By: ByApply}, false, false); err == nil || !strings.Contains(err.Error(), want[len("big.yaml: "):]) {
		t.Fatalf("apply of a catalog over the stored limit: %v", err)
	}

	small, err := Parse("small.yaml", manyJobs(1000))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Store(ctx, cli, small); err != nil {
		t.Fatalf("a valid catalog under the stored limit was refused: %v", err)
	}
}

// storedSize is the size of the catalog of data as the store encodes it.
func storedSize(t *testing.T, data []byte) int {
	t.Helper()
	b, err := json.Marshal(unchecked(t, data))
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// unchecked is the catalog of data validated in every way but its stored
// size, as the store would be given it by a caller that skipped validation.
func unchecked(t *testing.T, data []byte) *Catalog {
	t.Helper()
	raw, doc, err := decode("big.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	v := validator{locate: doc.locator("big.yaml")}
	cat := v.catalog(raw)
	if len(v.problems) > 0 {
		t.Fatal(v.problems)
	}
	return cat
}
