package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The disaster-recovery row of a deleted /kira/<cluster>/ prefix: the
// member loses its record and lease, cancels everything, tries to join
// again, finds no catalog and exits with an error saying so, even one
// started with --catalog. Started again with --catalog, it fires under
// tokens above every earlier one (new election keys get higher revisions),
// and no execution ran twice.
func TestDeletedClusterPrefix(t *testing.T) {
	etcd := etcdtest.StartCluster(t, 1)
	ep := etcd.Endpoints()[0]
	cli := etcdtest.NewClient(t, ep)
	dir := t.TempDir()
	log := filepath.Join(dir, "runs.log")
	cat := writeFile(t, dir, "catalog.yaml", fmt.Sprintf(snapshotCatalog, log))
	member := startMember(t, "--catalog", cat, "--etcd", ep)
	kiratest.WaitUntil(t, "every slot to fire", 30*time.Second, func() bool { return everySlotRanAbove(readRuns(t, log), 0) })
	if _, err := cli.Delete(context.Background(), keyspace.Cluster("snap"), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	kiratest.WaitUntil(t, "the member to exit", 30*time.Second, member.Exited)
	out := member.Output()
	for _, want := range []string{"lost the lease: cancelled every execution", "no catalog stored for the cluster"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the member's log does not say %q:\n%s", want, out)
		}
	}
	before := readRuns(t, log)
	highest := maxToken(before)
	startMember(t, "--catalog", cat, "--etcd", ep)
	kiratest.WaitUntil(t, "every slot to fire again", 30*time.Second,
		func() bool { return everySlotRanAbove(readRuns(t, log)[len(before):], highest) })
	ran := map[string]bool{}
	for i, r := range readRuns(t, log) {
		if ran[r.id] {
			t.Errorf("execution %s ran twice", r.id)
		}
		ran[r.id] = true
		if i >= len(before) && r.token <= highest {
			t.Errorf("after the deletion partition %d ran under token %d, not above %d", r.partition, r.token, highest)
		}
	}
}
