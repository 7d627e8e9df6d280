package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
	clientv3 "go.etcd.io/etcd/client/v3"
)

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
	ca, other := kiratest.NewCA(t, dir, "ca"), kiratest.NewCA(t, dir, "other-ca")
	serverCert, serverKey := ca.Issue(t, "etcd", true)
	rootCert, rootKey := ca.Issue(t, "root", false)
	kiraCert, kiraKey := ca.Issue(t, "kira", false)
	nobodyCert, nobodyKey := ca.Issue(t, "nobody", false)
	strangerCert, strangerKey := other.Issue(t, "kira", false)
	ep := "https://" + freePort(t)
	etcd := start(t, "etcd", "--name", "secure", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", ep, "--advertise-client-urls", ep, "--listen-peer-urls", "http://"+freePort(t),
		"--cert-file", serverCert, "--key-file", serverKey, "--trusted-ca-file", ca.File, "--client-cert-auth")
	root := etcdclient.Config{Endpoints: []string{ep}, CACert: ca.File, Cert: rootCert, Key: rootKey}
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
		return []string{"--etcd", ep, "--cacert", ca.File, "--cert", cert, "--key", key}
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
	var st ops.Status
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
		{"a CA that did not sign etcd's certificate", []string{"--etcd", ep, "--cacert", other.File, "--cert", kiraCert, "--key", kiraKey}, "certificate"},
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

const secretsCatalog = `cluster: secrets
membership:
  lease_ttl: 2s
jobs:
  - name: hook
    schedule: "@every 1s"
    http:
      url: "%s/hook"
      headers: {Authorization: "Bearer ${KIRA_TEST_HOOK_TOKEN}"}
  - name: check
    schedule: "@every 1s"
    command: ["sh", "-c", "test ${#API_TOKEN} -eq 12 && test -z \"$KIRA_TEST_HOOK_TOKEN\""] # the secret's length; its variable not passed
    env: {API_TOKEN: "${KIRA_TEST_HOOK_TOKEN}"}
`

// Secrets stay in the members' environment: the catalog refers to them, the
// member expands them when it runs a job, and neither etcd nor kira status,
// kira history or the member's log ever holds one.
func TestSecretsStayInTheMembersEnvironment(t *testing.T) {
	const secret = "s3cret-token"
	got := make(chan string, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Get("Authorization"):
		default:
		}
	}))
	defer srv.Close()
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	dir := t.TempDir()
	catalog := filepath.Join(dir, "catalog.yaml")
	os.WriteFile(catalog, []byte(fmt.Sprintf(secretsCatalog, srv.URL)), 0o600)
	out, code := runKira(t, "apply", "-f", catalog, "--etcd", ep)
	if code != 0 || !strings.Contains(out, "warning: "+catalog) || !strings.Contains(out, "${KIRA_TEST_HOOK_TOKEN} is not set in this environment") {
		t.Fatalf("kira apply without the variable: exit %d, want 0 and a warning:\n%s", code, out)
	}
	t.Setenv("KIRA_TEST_HOOK_TOKEN", secret) // the member's environment, not the catalog's
	member := start(t, "run", "--cluster", "secrets", "--etcd", ep)
	if auth := kiratest.Receive(t, got, 15*time.Second, "the hook's request"); auth != "Bearer "+secret {
		t.Fatalf("Authorization %q, want the expanded secret", auth)
	}
	kiratest.WaitUntil(t, "the command job to succeed with the secret in its env", 15*time.Second, func() bool {
		out, code := runKira(t, "history", "check", "--cluster", "secrets", "--etcd", ep, "-o", "json")
		return code == 0 && strings.Contains(out, `"outcome": "succeeded"`)
	})
	var seen []string
	for _, args := range [][]string{
		{"status", "--cluster", "secrets", "--etcd", ep, "-o", "json"},
		{"history", "hook", "--cluster", "secrets", "--etcd", ep, "-o", "json"},
		{"history", "check", "--cluster", "secrets", "--etcd", ep, "-o", "json"},
	} {
		out, _ := runKira(t, args...)
		seen = append(seen, out)
	}
	cli := etcd.Client(t)
	resp, err := cli.Get(context.Background(), "/kira/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		seen = append(seen, string(kv.Key)+"="+string(kv.Value))
	}
	seen = append(seen, member.Output())
	for _, s := range seen {
		if strings.Contains(s, secret) {
			t.Fatalf("the secret reached etcd, a command's output or the log:\n%s", s)
		}
	}
}
