package etcdtest

import (
	"context"
	"github.com/kira-scheduler/kira/internal/etcdnode"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, PeerConnectionGoroutines()...) }

func TestSingleNodeServesWrites(t *testing.T) {
	c := Start(t)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get = %v, %v", resp, err)
	}
}

// A three-member cluster survives losing one member, stops accepting writes
// without quorum, and serves them again once quorum is back.
func TestClusterQuorum(t *testing.T) {
	c := StartCluster(t, 3)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := WaitHealthy(ctx, cli); err != nil {
		t.Fatal(err)
	}
	leader := c.Leader()
	if leader < 0 {
		t.Fatal("no leader")
	}
	c.Stop(leader)
	if err := WaitHealthy(ctx, cli); err != nil {
		t.Fatalf("one member down: %v", err)
	}
	other := (leader + 1) % 3
	c.Stop(other)
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := cli.Put(short, "k", "no quorum")
	cancelShort()
	if err == nil {
		t.Fatal("write accepted without quorum")
	}
	c.Restart(other)
	if err := WaitHealthy(ctx, cli); err != nil {
		t.Fatalf("quorum restored: %v", err)
	}
}

// A port taken between being picked and being bound (by another process, or
// as an outgoing connection's local port) does not fail the launch: it is
// tried again with new ports.
func TestLaunchRetriesAPortTakenMeanwhile(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	picks := 0
	pickAddr = func() (string, error) {
		if picks++; picks == 1 {
			return taken.Addr().String(), nil
		}
		return etcdnode.FreeAddr()
	}
	defer func() { pickAddr = etcdnode.FreeAddr }()
	c := Start(t)
	if picks < 4 {
		t.Fatalf("%d ports picked; want a second attempt", picks)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Client(t).Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
}
