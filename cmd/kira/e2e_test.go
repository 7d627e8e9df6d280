package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdnode"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
	"go.uber.org/goleak"
)

var kiraBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kira-e2e")
	if err != nil {
		panic(err)
	}
	kiraBin = filepath.Join(dir, "kira")
	if out, err := exec.Command("go", "build", "-o", kiraBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building kira: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(etcdtest.IgnoredGoroutines()...); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

type proc = etcdtest.Process

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	return etcdtest.StartProcess(t, kiraBin, args...)
}

func runKira(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(kiraBin, args...).CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		t.Fatal(err)
	}
	return string(out), 0
}

func freePort(t *testing.T) string { return etcdtest.FreeAddr(t) }

// freeURLs are two distinct free loopback URLs, an etcd's client and
// peer (etcdnode.FreeAddrs: two calls of freePort can return one port twice).
func freeURLs(t *testing.T) (client, peer string) {
	t.Helper()
	addrs, err := etcdnode.FreeAddrs(2)
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + addrs[0], "http://" + addrs[1]
}

func TestValidate(t *testing.T) {
	out, code := runKira(t, "validate", "../../examples/catalog.yaml")
	if code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("valid catalog: exit %d: %s", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("membership:\n  lease_ttl: 1s\njobs:\n  - name: x\n    schedule: '* * *'\n    command: [true]\n"), 0o600)
	out, code = runKira(t, "validate", bad)
	if code != 1 || !strings.Contains(out, bad+":2:") || !strings.Contains(out, bad+":5:") {
		t.Fatalf("invalid catalog: exit %d: %s", code, out)
	}
	// kira run refuses it too, and starts nothing.
	out, code = runKira(t, "run", "--catalog", bad, "--etcd", "http://127.0.0.1:1")
	if code != 1 || !strings.Contains(out, "lease_ttl") {
		t.Fatalf("run with invalid catalog: exit %d: %s", code, out)
	}
}

// kira etcd runs a three-member cluster from etcd's own flags; each member
// answers GET /health and stops cleanly on SIGTERM.
func TestEtcdCluster(t *testing.T) {
	dir := t.TempDir()
	var clients, peers, initial []string
	for i := 0; i < 3; i++ {
		clients = append(clients, "http://"+freePort(t))
		peers = append(peers, "http://"+freePort(t))
		initial = append(initial, fmt.Sprintf("e%d=%s", i, peers[i]))
	}
	var procs []*proc
	for i := 0; i < 3; i++ {
		procs = append(procs, start(t, "etcd", "--name", fmt.Sprintf("e%d", i), "--data-dir", filepath.Join(dir, fmt.Sprint(i)),
			"--listen-client-urls", clients[i], "--advertise-client-urls", clients[i],
			"--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new"))
	}
	for _, c := range clients {
		kiratest.WaitUntil(t, "healthy "+c, 60*time.Second, func() bool {
			resp, err := http.Get(c + "/health")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var h struct{ Health string }
			return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Health == "true"
		})
	}
	cli := etcdtest.NewClient(t, clients...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := etcdtest.WaitHealthy(ctx, cli); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	for i, p := range procs {
		if code := p.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
			t.Fatalf("member %d exited %d on SIGTERM", i, code)
		}
	}
}

const threeMemberCatalog = `cluster: e2e
membership:
  lease_ttl: 2s
jobs:
  - name: tick
    schedule: "@every 1s"
    partitions: 30 # with 9, one of 3 members owns none about 8%% of the time (3 × (2/3)^9)
    command: ["sh", "-c", "echo \"$KIRA_JOB/$KIRA_PARTITION $KIRA_FENCING_TOKEN $KIRA_MEMBER\" >> %s"]
`

// settled reports whether every slot is owned by a live member, and how many
// slots each member owns.
func settled(st ops.Status, members int) (map[string]int, bool) {
	live := map[string]bool{}
	for _, m := range st.Members {
		live[m.ID] = true
	}
	owned := map[string]int{}
	for _, s := range st.Slots {
		if !live[s.Owner] {
			return nil, false
		}
		owned[s.Owner]++
	}
	return owned, len(st.Members) == members && len(st.Slots) == 30 && len(owned) == members
}

// Three kira run processes over one etcd share the slots; kill -9 of one
// moves its slots to the others within the lease TTL (plus detection), with
// higher tokens; SIGTERM of another hands over at once and exits 0.
func TestThreeMembers(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	dir := t.TempDir()
	log := filepath.Join(dir, "runs.log")
	cat := filepath.Join(dir, "catalog.yaml")
	os.WriteFile(cat, []byte(fmt.Sprintf(threeMemberCatalog, log)), 0o600)
	var members []*proc
	for i := 0; i < 3; i++ {
		members = append(members, start(t, "run", "--catalog", cat, "--etcd", ep, "--name", fmt.Sprintf("m%d", i)))
	}
	var st ops.Status
	kiratest.WaitUntil(t, "slots spread over three members", 30*time.Second, func() bool {
		st = statusOf(t, ep, "e2e")
		_, ok := settled(st, 3)
		return ok
	})
	before := map[int]int64{}
	for _, s := range st.Slots {
		before[s.Partition] = s.Token
	}
	// The victim is the member leading the most slots.
	owned, _ := settled(st, 3)
	victim, most := "", 0
	for id, n := range owned {
		if n > most {
			victim, most = id, n
		}
	}
	var victimProc *proc
	for _, m := range members {
		if strings.Contains(m.Output(), victim) {
			victimProc = m
		}
	}
	if victimProc == nil {
		t.Fatalf("no process logged member id %s", victim)
	}
	killed := time.Now()
	victimProc.Signal(syscall.SIGKILL)
	kiratest.WaitUntil(t, "slots moved off the killed member", 15*time.Second, func() bool {
		st = statusOf(t, ep, "e2e")
		_, ok := settled(st, 2)
		return ok
	})
	t.Logf("kill -9 → every slot owned again: %s (lease TTL 2s)", time.Since(killed).Round(time.Millisecond))
	for _, s := range st.Slots {
		if s.Token < before[s.Partition] {
			t.Fatalf("slot %d token went down: %d → %d", s.Partition, before[s.Partition], s.Token)
		}
	}
	// Tokens of moved slots rose; the others kept theirs.
	moved := 0
	for _, s := range st.Slots {
		if s.Token > before[s.Partition] {
			moved++
		}
	}
	if moved < most {
		t.Fatalf("%d slots got new tokens; the killed member led %d", moved, most)
	}

	// Graceful stop of another member: exit 0, slots handed over fast.
	var leaving *proc
	for _, m := range members {
		if m != victimProc {
			leaving = m
			break
		}
	}
	stopped := time.Now()
	if code := leaving.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	kiratest.WaitUntil(t, "one member owning everything", 10*time.Second, func() bool {
		st = statusOf(t, ep, "e2e")
		_, ok := settled(st, 1)
		return ok
	})
	t.Logf("SIGTERM → every slot owned by the remaining member: %s (lease TTL 2s)", time.Since(stopped).Round(time.Millisecond))
	if took := time.Since(stopped); took > 2*time.Second {
		t.Fatalf("graceful handover took %s, not less than the 2s TTL", took)
	}
	// The executions carried the env contract.
	data, _ := os.ReadFile(log)
	if !strings.Contains(string(data), "tick/") {
		t.Fatalf("no execution wrote its environment: %q", data)
	}
}

// examples/cluster.sh runs: three kira etcd, three members, a kill -9 and
// a SIGTERM, with who took over and how fast.
func TestClusterExample(t *testing.T) {
	ports := make([]string, 6)
	for i := range ports {
		_, ports[i], _ = strings.Cut(freePort(t), ":")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../../examples/cluster.sh")
	cmd.Env = append(os.Environ(), "KIRA="+kiraBin, "KIRA_CLUSTER_PORTS="+strings.Join(ports, " "))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("examples/cluster.sh: %v\n%s", err, out)
	}
	for _, want := range []string{"every slot owned by b and c", "ms after the kill", "every slot owned by c", "ms after the SIGTERM", "c leads 30 slots"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	t.Logf("%s", out)
}
