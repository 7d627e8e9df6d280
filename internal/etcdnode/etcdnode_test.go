package etcdnode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdnode"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

// The production tuning is etcd's own: fsync on and its default ticks; only
// Fast, which kira bench uses when asked and the tests always, skips fsync.
func TestTuning(t *testing.T) {
	c := etcdnode.Config{Name: "a", DataDir: t.TempDir(), ListenClientURLs: "http://127.0.0.1:2379", ListenPeerURLs: "http://127.0.0.1:2380"}
	prod, err := c.Embed()
	if err != nil {
		t.Fatal(err)
	}
	if prod.UnsafeNoFsync || prod.TickMs != 100 || prod.ElectionMs != 1000 {
		t.Errorf("production: no fsync %v, tick %d ms, election %d ms; want fsync, 100, 1000", prod.UnsafeNoFsync, prod.TickMs, prod.ElectionMs)
	}
	c.Tuning = etcdnode.Fast
	fast, err := c.Embed()
	if err != nil {
		t.Fatal(err)
	}
	if !fast.UnsafeNoFsync || fast.TickMs != 20 {
		t.Errorf("fast: no fsync %v, tick %d ms; want no fsync, 20", fast.UnsafeNoFsync, fast.TickMs)
	}
	if _, err := (etcdnode.Config{Name: "a", DataDir: t.TempDir(), ListenClientURLs: "127.0.0.1:2379", ListenPeerURLs: "http://127.0.0.1:2380"}).Embed(); err == nil {
		t.Error("a client URL without a scheme was accepted")
	}
}

// StartLocal serves clients on free ports, as kira bench uses it.
func TestStartLocalServes(t *testing.T) {
	e, err := etcdnode.StartLocal(t.TempDir(), etcdnode.Production)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cli := etcdtest.NewClient(t, etcdnode.ClientURLs(e)...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/k", "v"); err != nil {
		t.Fatal(err)
	}
}

// TLS settings that etcd would not use, or half of them, are refused:
// etcd would otherwise serve plain HTTP where its operator asked for TLS.
func TestTLSThatWouldNotBeUsedIsRefused(t *testing.T) {
	base := func() etcdnode.Config {
		return etcdnode.Config{Name: "a", DataDir: t.TempDir(), ListenClientURLs: "https://127.0.0.1:2379", ListenPeerURLs: "http://127.0.0.1:2380",
			ClientTLS: etcdnode.TLS{CertFile: "s.pem", KeyFile: "s-key.pem", TrustedCAFile: "ca.pem", ClientCertAuth: true}}
	}
	if _, err := base().Embed(); err != nil {
		t.Fatalf("a complete TLS configuration: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*etcdnode.Config)
		want   string
	}{
		{"https without a certificate", func(c *etcdnode.Config) { c.ClientTLS = etcdnode.TLS{} }, "no --cert-file"},
		{"a certificate on http", func(c *etcdnode.Config) { c.ListenClientURLs = "http://127.0.0.1:2379" }, "is http://"},
		{"a key without its certificate", func(c *etcdnode.Config) { c.ClientTLS.CertFile = "" }, "go together"},
		{"client-cert-auth without a CA", func(c *etcdnode.Config) { c.ClientTLS.TrustedCAFile = "" }, "needs --trusted-ca-file"},
		{"a peer certificate on http", func(c *etcdnode.Config) { c.PeerTLS = etcdnode.TLS{CertFile: "p.pem", KeyFile: "p-key.pem"} }, "--peer-cert-file is given"},
	} {
		c := base()
		tc.change(&c)
		if _, err := c.Embed(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// FreeAddrs never hands out one port twice, as FreeAddr called in a row can.
func TestFreeAddrsAreDistinct(t *testing.T) {
	addrs, err := etcdnode.FreeAddrs(64)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("%s handed out twice in %v", a, addrs)
		}
		seen[a] = true
	}
}
