package etcdnode_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdnode"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcd moves its compacted revision on as soon as a compaction is asked
// for and deletes what it freed in the background. KeepSpace defragments
// once that deletion has finished: a defragment before it returns nothing,
// and while every write is refused no later compaction comes to try again.
// The compaction here reads one revision every 50 ms, and 100 small keys
// come before the junk, so KeepSpace's first looks come before it has
// deleted any junk.
func TestKeepSpaceWaitsForTheCompactionToFinish(t *testing.T) {
	addrs, err := etcdnode.FreeAddrs(2)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := etcdnode.Config{Name: "full", DataDir: t.TempDir(), ListenClientURLs: "http://" + addrs[0],
		ListenPeerURLs: "http://" + addrs[1], Quiet: true, Tuning: etcdnode.Fast}.Embed()
	if err != nil {
		t.Fatal(err)
	}
	cfg.QuotaBackendBytes = 8 << 20
	cfg.CompactionBatchLimit = 1
	cfg.CompactionSleepInterval = 50 * time.Millisecond
	e, err := etcdnode.StartEmbed(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cli := etcdtest.NewClient(t, etcdnode.ClientURLs(e)...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	for i := range 100 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/small/%03d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	junk := strings.Repeat("x", 1<<20)
	for i := 0; ; i++ {
		_, err := cli.Put(ctx, "/junk/"+string(rune('a'+i)), junk)
		if err != nil && strings.Contains(err.Error(), "database space exceeded") {
			break
		}
		if err != nil || i > 32 {
			t.Fatalf("filling etcd: put %d: %v", i, err)
		}
	}
	del, err := cli.Delete(ctx, "/junk/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("deleting under NOSPACE: %v", err)
	}
	if _, err := cli.Compact(ctx, del.Header.Revision); err != nil {
		t.Fatal(err)
	}

	keeping, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { etcdnode.KeepSpace(keeping, e, 0, slog.New(slog.DiscardHandler)); close(done) }()
	defer func() {
		stop()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("KeepSpace did not return")
		}
	}()
	kiratest.WaitUntil(t, "the alarm disarmed and a write accepted", 30*time.Second, func() bool {
		alarms, err := cli.AlarmList(ctx)
		if err != nil || len(alarms.Alarms) > 0 {
			return false
		}
		_, err = cli.Put(ctx, "/after", "x")
		return err == nil
	})
}
