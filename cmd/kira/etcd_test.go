package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdnode"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/spf13/pflag"
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
		fs := pflag.NewFlagSet("etcd", pflag.ContinueOnError)
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

// kira etcd --config-file takes etcd's own YAML configuration.
func TestEtcdConfigFile(t *testing.T) {
	dir := t.TempDir()
	client, peer := freeURLs(t)
	file := filepath.Join(dir, "etcd.yaml")
	os.WriteFile(file, []byte(fmt.Sprintf("name: from-file\ndata-dir: %s\nlisten-client-urls: %s\nadvertise-client-urls: %s\nlisten-peer-urls: %s\ninitial-advertise-peer-urls: %s\ninitial-cluster: from-file=%s\n",
		filepath.Join(dir, "data"), client, client, peer, peer, peer)), 0o600)
	p := start(t, "etcd", "--config-file", file)
	kiratest.WaitUntil(t, "etcd from the config file to serve", 60*time.Second, func() bool {
		resp, err := http.Get(client + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	// The line may follow the first answer by a moment.
	kiratest.WaitUntil(t, "kira etcd to say it serves, under the name from the file", 10*time.Second, func() bool {
		return strings.Contains(p.Output(), "member from-file serving clients on "+client)
	})
}
