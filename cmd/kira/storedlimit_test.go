package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/etcdtest"
	"github.com/kira-scheduler/kira/keyspace"
)

// A catalog of 5,000 one-line jobs is under the file limit but over the
// stored one: kira validate, kira apply --dry-run and kira run --catalog all
// refuse it with the same figures, and nothing is stored.
func TestValidateRefusesWhatRunRefuses(t *testing.T) {
	var b strings.Builder
	b.WriteString("cluster: many\njobs:\n")
	for i := range 5000 {
		fmt.Fprintf(&b, "  - {name: customer-%05d, schedule: '@every 1m', handler: noop}\n", i)
	}
	file := filepath.Join(t.TempDir(), "many.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	env := []string{"KIRA_ETCD_ENDPOINTS=" + ep}
	const refusal = " bytes as stored, over the limit of "
	_, validateErr, code := kiraWith(t, "", nil, "validate", file)
	if code != 1 || !strings.Contains(validateErr, file+": the catalog is ") || !strings.Contains(validateErr, refusal+fmt.Sprint(config.MaxCatalogBytes)) {
		t.Fatalf("validate: exit %d: %s", code, validateErr)
	}
	figure := validateErr[strings.Index(validateErr, "the catalog is "):strings.Index(validateErr, refusal)]
	for _, args := range [][]string{
		{"apply", "--dry-run", "-f", file},
		{"apply", "-f", file},
		{"run", "--etcd", ep, "--cluster", "many", "--catalog", file},
	} {
		_, stderr, code := kiraWith(t, "", env, args...)
		if code == 0 || !strings.Contains(stderr, figure+refusal) {
			t.Fatalf("%s: exit %d, want the refusal of validate (%s): %s", args, code, figure, stderr)
		}
	}
	resp, err := etcd.Client(t).Get(t.Context(), keyspace.Catalog("many"))
	if err != nil || resp.Count != 0 {
		t.Fatalf("a refused catalog was stored (%v)", err)
	}
}
