package etcdnode

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("go.etcd.io/etcd/client/pkg/v3/logutil.(*MergeLogger).outputLoop"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// The production tuning is etcd's own: fsync on and its default ticks; only
// Fast, which kira bench uses when asked and the tests always, skips fsync.
func TestTuning(t *testing.T) {
	c := Config{Name: "a", DataDir: t.TempDir(), ListenClientURLs: "http://127.0.0.1:2379", ListenPeerURLs: "http://127.0.0.1:2380"}
	prod, err := c.Embed()
	if err != nil {
		t.Fatal(err)
	}
	if prod.UnsafeNoFsync || prod.TickMs != 100 || prod.ElectionMs != 1000 {
		t.Errorf("production: no fsync %v, tick %d ms, election %d ms; want fsync, 100, 1000", prod.UnsafeNoFsync, prod.TickMs, prod.ElectionMs)
	}
	c.Tuning = Fast
	fast, err := c.Embed()
	if err != nil {
		t.Fatal(err)
	}
	if !fast.UnsafeNoFsync || fast.TickMs != 20 {
		t.Errorf("fast: no fsync %v, tick %d ms; want no fsync, 20", fast.UnsafeNoFsync, fast.TickMs)
	}
	if _, err := (Config{Name: "a", DataDir: t.TempDir(), ListenClientURLs: "127.0.0.1:2379", ListenPeerURLs: "http://127.0.0.1:2380"}).Embed(); err == nil {
		t.Error("a client URL without a scheme was accepted")
	}
}

// StartLocal serves clients on free ports, as kira bench uses it.
func TestStartLocalServes(t *testing.T) {
	e, err := StartLocal(t.TempDir(), Production)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: ClientURLs(e), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/k", "v"); err != nil {
		t.Fatal(err)
	}
}
