package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestBinaryLinksNoTestCode holds that the production binary links neither
// Go's testing package nor Kira's test harness: kira bench starts its etcd
// through etcdnode, as kira run does, never through etcdtest.
func TestBinaryLinksNoTestCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/kira-scheduler/kira/internal/etcdnode") {
		t.Fatalf("go list -deps printed no etcdnode: %d packages, nothing to check", len(deps))
	}
	for _, banned := range []string{"testing", "go.uber.org/goleak", "github.com/kira-scheduler/kira/internal/etcdtest", "github.com/kira-scheduler/kira/internal/chaos"} {
		if slices.Contains(deps, banned) {
			t.Errorf("kira links %s", banned)
		}
	}
}
