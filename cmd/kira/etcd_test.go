package main

import (
	"flag"
	"io"
	"testing"

	"github.com/kira-scheduler/kira/etcdnode"
	"go.etcd.io/etcd/server/v3/etcdserver"
)

// TestSingleMemberEtcdKeepsFewRaftEntries checks that an etcd of one member
// (kira run's embedded one, or kira etcd alone) keeps few applied raft
// entries in memory, and that a member of a cluster keeps etcd's default for
// its followers.
func TestSingleMemberEtcdKeepsFewRaftEntries(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want uint64
	}{
		{[]string{"--name", "a"}, etcdnode.SingleMemberCatchUpEntries},
		{[]string{"--name", "a", "--initial-cluster", "a=http://127.0.0.1:2380"}, etcdnode.SingleMemberCatchUpEntries},
		{[]string{"--name", "a", "--initial-cluster", "a=http://127.0.0.1:2380,b=http://127.0.0.1:2382,c=http://127.0.0.1:2384"},
			etcdserver.DefaultSnapshotCatchUpEntries},
	} {
		fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var c etcdnode.Config
		registerEtcdFlags(fs, &c)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		c.DataDir = t.TempDir()
		cfg, err := c.Embed()
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if cfg.SnapshotCatchUpEntries != tc.want {
			t.Errorf("%v: SnapshotCatchUpEntries = %d, want %d", tc.args, cfg.SnapshotCatchUpEntries, tc.want)
		}
	}
}
