package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/etcdclient"
	"github.com/kira-scheduler/kira/kiratest"
	"github.com/kira-scheduler/kira/operator"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// testCA issues certificates for one test.
type testCA struct {
	dir  string
	name string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA's certificate, PEM
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{dir: dir, name: name, cert: cert, key: key, file: filepath.Join(dir, name+".pem")}
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue writes a certificate for cn (a server's for 127.0.0.1 when server)
// and its key, and returns their paths.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(ca.dir, ca.name+"-"+cn+".pem"), filepath.Join(ca.dir, ca.name+"-"+cn+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

// enableAuth creates, as root (its certificate's common name), the users and
// the one role Kira needs: read/write on /kira/<cluster>/ and nothing else.
func enableAuth(t *testing.T, root etcdclient.Config) {
	t.Helper()
	cli, err := etcdclient.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	steps := []func() error{
		func() error {
			_, err := cli.UserAddWithOptions(ctx, "root", "", &clientv3.UserAddOptions{NoPassword: true})
			return err
		},
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "kira-demo"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "kira-demo", "/kira/demo/", clientv3.GetPrefixRangeEnd("/kira/demo/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "kira", "kira-secret"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "kira", "kira-demo"); return err },
		func() error { _, err := cli.UserAdd(ctx, "nobody", "nobody-secret"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("auth setup step %d: %v", i, err)
		}
	}
}

const securedCatalog = `cluster: demo
membership:
  lease_ttl: 2s
jobs:
  - name: tick
    schedule: "@every 1s"
    partitions: 30 # with 4, all of them land on one of two members 1 time in 8
    command: ["true"]
`

// An etcd with client TLS, client-certificate auth and auth enabled, and
// exactly the role docs/security.md gives Kira: two members (one known by
// its certificate, one by user and password), kira apply and kira status
// all work through it. A member whose user lacks the role, or whose
// certificate comes from another CA, or that does not trust etcd's
// certificate, exits at start with an error that names the cause.
func TestSecuredEtcd(t *testing.T) {
	dir := t.TempDir()
	ca, other := newTestCA(t, dir, "ca"), newTestCA(t, dir, "other-ca")
	serverCert, serverKey := ca.issue(t, "etcd", true)
	rootCert, rootKey := ca.issue(t, "root", false)
	kiraCert, kiraKey := ca.issue(t, "kira", false)
	nobodyCert, nobodyKey := ca.issue(t, "nobody", false)
	strangerCert, strangerKey := other.issue(t, "kira", false)
	ep := "https://" + freePort(t)
	etcd := start(t, "etcd", "--name", "secure", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", ep, "--advertise-client-urls", ep, "--listen-peer-urls", "http://"+freePort(t),
		"--cert-file", serverCert, "--key-file", serverKey, "--trusted-ca-file", ca.file, "--client-cert-auth")
	root := etcdclient.Config{Endpoints: []string{ep}, CACert: ca.file, Cert: rootCert, Key: rootKey}
	kiratest.WaitUntil(t, "the TLS etcd to serve", 60*time.Second, func() bool {
		cli, err := etcdclient.New(root)
		if err != nil {
			return false
		}
		defer cli.Close()
		return etcdclient.Check(context.Background(), cli, root, "/", time.Second) == nil
	})
	enableAuth(t, root)

	tlsArgs := func(cert, key string) []string {
		return []string{"--etcd", ep, "--cacert", ca.file, "--cert", cert, "--key", key}
	}
	catalog := filepath.Join(dir, "catalog.yaml")
	os.WriteFile(catalog, []byte(securedCatalog), 0o600)
	if out, code := runKira(t, append([]string{"apply", "-f", catalog}, tlsArgs(kiraCert, kiraKey)...)...); code != 0 {
		t.Fatalf("kira apply through TLS and auth: exit %d: %s", code, out)
	}
	passwordFile := filepath.Join(dir, "password")
	os.WriteFile(passwordFile, []byte("kira-secret\n"), 0o600)
	a := start(t, append([]string{"run", "--cluster", "demo", "--name", "by-cert"}, tlsArgs(kiraCert, kiraKey)...)...)
	b := start(t, append([]string{"run", "--cluster", "demo", "--name", "by-password", "--user", "kira", "--password-file", passwordFile}, tlsArgs(nobodyCert, nobodyKey)...)...)
	var st operator.Status
	kiratest.WaitUntil(t, "both members to share every slot", 30*time.Second, func() bool {
		out, code := runKira(t, append([]string{"status", "--cluster", "demo", "-o", "json"}, tlsArgs(kiraCert, kiraKey)...)...)
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			return false
		}
		owners := map[string]bool{}
		for _, s := range st.Slots {
			owners[s.Owner] = s.Owner != ""
		}
		return len(st.Members) == 2 && len(st.Slots) == 30 && len(owners) == 2 && !owners[""]
	})

	refused := []struct {
		name string
		args []string
		want string
	}{
		{"a user without the role", tlsArgs(nobodyCert, nobodyKey), "no read/write permission on /kira/demo/"},
		{"a wrong password", append(tlsArgs(kiraCert, kiraKey), "--user", "kira:wrong"), "authentication of user kira failed"},
		{"a certificate from another CA", tlsArgs(strangerCert, strangerKey), "refused this client's certificate"},
		{"a CA that did not sign etcd's certificate", []string{"--etcd", ep, "--cacert", other.file, "--cert", kiraCert, "--key", kiraKey}, "certificate"},
	}
	for _, tc := range refused {
		p := start(t, append([]string{"run", "--cluster", "demo"}, tc.args...)...)
		select {
		case <-p.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: kira run still running after 30 s; want an exit at start", tc.name)
		}
		t.Logf("%s: %s", tc.name, p.Output())
		if code := p.Cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(p.Output(), tc.want) {
			t.Errorf("%s: exit %d, output:\n%s\nwant exit 1 and %q", tc.name, code, p.Output(), tc.want)
		}
	}
	for _, out := range []string{a.Output(), b.Output()} {
		if strings.Contains(out, "kira-secret") {
			t.Errorf("a member logged the etcd password:\n%s", out)
		}
	}
	for _, p := range []*proc{a, b, etcd} {
		if code := p.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
			t.Errorf("exit %d on SIGTERM:\n%s", code, p.Output())
		}
	}
}
