package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// promCatalog: sweep's six slots and reconcile's one spread over three
// members; reconcile fails while the file its command tests exists, and
// runs every 3 s so that two of its periods pass quickly.
const promCatalog = `cluster: prom
membership: {lease_ttl: 6s}
jobs:
  - {name: sweep, schedule: "@every 2s", partitions: 6, command: ["true"]}
  - {name: reconcile, schedule: "@every 3s", command: ["sh", "-c", "test ! -e %s"]}
`

// promServer is a real Prometheus server (Debian's prometheus package)
// scraping the members, queried through client_golang's API client.
type promServer struct {
	api promv1.API
}

// startPrometheus starts prometheus with a plain scrape config (job_name
// kira, static targets, the default honor_labels: false), the shipped
// rules, and 1 s scrape and evaluation intervals.
func startPrometheus(t *testing.T, targets []string) *promServer {
	t.Helper()
	bin := prometheusTool(t, "prometheus")
	rules, err := filepath.Abs("../../deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: kira
    static_configs: [{targets: ["%s"]}]
`, rules, strings.Join(targets, `", "`))
	os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600)
	addr := freePort(t)
	etcdtest.StartProcess(t, bin, "--config.file", filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path", filepath.Join(dir, "data"), "--web.listen-address", addr)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	client, err := api.NewClient(api.Config{Address: "http://" + addr, RoundTripper: transport})
	if err != nil {
		t.Fatal(err)
	}
	return &promServer{api: promv1.NewAPI(client)}
}

// query evaluates q now; a failed query is an empty vector and the error.
func (p *promServer) query(q string) (model.Vector, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, _, err := p.api.Query(ctx, q, time.Now())
	if err != nil {
		return nil, err
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("%s: a %s, not a vector", q, v.Type())
	}
	return vec, nil
}

// mustQuery is query, failing the test on an error.
func (p *promServer) mustQuery(t *testing.T, q string) model.Vector {
	t.Helper()
	vec, err := p.query(q)
	if err != nil {
		t.Fatal(err)
	}
	return vec
}

// byLabel maps each sample's value of label to its value.
func byLabel(vec model.Vector, label model.LabelName) map[string]float64 {
	out := map[string]float64{}
	for _, s := range vec {
		out[string(s.Metric[label])] = float64(s.Value)
	}
	return out
}

// alertRules returns the expression of each alerting rule Prometheus has
// loaded, by name, once the five shipped rules are loaded and healthy.
func (p *promServer) alertRules(t *testing.T) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	kiratest.WaitUntil(t, "Prometheus to load the five shipped rules", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := p.api.Rules(ctx, nil)
		if err != nil {
			return false
		}
		clear(exprs)
		for _, g := range res.Groups {
			for _, r := range g.Rules {
				if a, ok := r.(promv1.AlertingRule); ok && a.Health == promv1.RuleHealthGood {
					exprs[a.Name] = a.Query
				}
			}
		}
		return len(exprs) == 5
	})
	return exprs
}

// firing returns the labels of the firing alerts named name.
func (p *promServer) firing(name string) []model.LabelSet {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := p.api.Alerts(ctx)
	if err != nil {
		return nil
	}
	var out []model.LabelSet
	for _, a := range res.Alerts {
		if a.State == promv1.AlertStateFiring && string(a.Labels[model.AlertNameLabel]) == name {
			out = append(out, a.Labels)
		}
	}
	return out
}

// The shipped rules and the documented queries in a real Prometheus
// scraping three kira run --http members with a plain scrape config: no
// label is renamed; on the healthy cluster no rule's expression is true for
// 20 s and the docs' queries return what they say; a kill -9 of the member
// leading the most slots makes the leader rule name the job in kira_job
// until its slots are taken over; a job that fails fires
// KiraJobNotSucceeding with its name.
func TestAlertsInARealPrometheus(t *testing.T) {
	etcd := etcdtest.Start(t)
	dir := t.TempDir()
	failFile, catalog := filepath.Join(dir, "fail"), filepath.Join(dir, "c.yaml")
	os.WriteFile(catalog, []byte(fmt.Sprintf(promCatalog, failFile)), 0o600)
	members := map[string]*proc{}
	var targets []string
	for _, n := range []string{"a", "b", "c"} {
		addr := freePort(t)
		members[addr] = start(t, "run", "--catalog", catalog, "--etcd", etcd.Endpoints()[0], "--name", n, "--http", addr)
		targets = append(targets, addr)
	}
	prom := startPrometheus(t, targets)
	rules := prom.alertRules(t)
	kiratest.WaitUntil(t, "three members up, every slot led once and no rule's expression true", 60*time.Second, func() bool {
		up := prom.mustQuery(t, `sum(up{job="kira"})`)
		return len(up) == 1 && up[0].Value == 3 && ledAsPartitioned(prom) && len(trueRules(t, prom, rules)) == 0
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if names := trueRules(t, prom, rules); len(names) > 0 {
			t.Fatalf("on a healthy cluster the expressions of %v are true", names)
		}
		time.Sleep(250 * time.Millisecond)
	}
	checkLabels(t, prom)
	checkDocumentedMetrics(t, prom)
	checkDocumentedQueries(t, prom)

	killMostLoaded(t, prom, members, rules["KiraSlotWithoutOneLeader"])

	// The job fails from now on; its last success stays where it was.
	kiratest.WaitUntil(t, "a success of reconcile seen by a live member", 30*time.Second, func() bool {
		return len(prom.mustQuery(t, `time() - max(kira_job_last_success_timestamp_seconds{kira_job="reconcile"}) < 4`)) == 1
	})
	os.WriteFile(failFile, nil, 0o600)
	kiratest.WaitUntil(t, "KiraJobNotSucceeding firing for reconcile", 60*time.Second, func() bool {
		fired := prom.firing("KiraJobNotSucceeding")
		return len(fired) == 1 && fired[0]["kira_job"] == "reconcile"
	})
}

// trueRules names the rules whose expression returns something now.
func trueRules(t *testing.T, prom *promServer, rules map[string]string) []string {
	t.Helper()
	var names []string
	for name, expr := range rules {
		if vec := prom.mustQuery(t, expr); len(vec) > 0 {
			names = append(names, fmt.Sprintf("%s %v", name, vec))
		}
	}
	sort.Strings(names)
	return names
}

// ledAsPartitioned: Prometheus sees each job's slots led once in all.
func ledAsPartitioned(prom *promServer) bool {
	led, err := prom.query(`sum by (kira_job) (kira_slots_led)`)
	if err != nil {
		return false
	}
	l := byLabel(led, "kira_job")
	return len(l) == 2 && l["sweep"] == 6 && l["reconcile"] == 1
}

// checkLabels: no Kira label was renamed by the scrape (exported_*), and
// none is a label Prometheus or its Kubernetes service discovery (as the
// Prometheus Operator relabels it) sets on a target.
func checkLabels(t *testing.T, prom *promServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	names, _, err := prom.api.LabelNames(ctx, []string{`{__name__=~"kira_.+"}`}, time.Now().Add(-time.Hour), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, "kira_job") {
		t.Errorf("no kira_job label among %v", names)
	}
	for _, n := range names {
		if strings.HasPrefix(string(n), "exported_") || slices.Contains([]model.LabelName{"namespace", "pod", "container", "service", "endpoint", "node"}, n) {
			t.Errorf("label %s: renamed by the scrape, or one a Kubernetes scrape would set (all: %v)", n, names)
		}
	}
}

// documentedSeries parses docs/operations.md's table of metrics: each
// kira_ series with its labels.
func documentedSeries(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `(kira_[a-z_]+)(?:\\{([a-z_,]+)\\})?` \\|")
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]] = nil
			if m[2] != "" {
				out[m[1]] = strings.Split(m[2], ",")
			}
		}
	}
	if len(out) < 15 {
		t.Fatalf("docs/operations.md lists %d kira_ series: its table was not found", len(out))
	}
	return out
}

// notExercised are the documented series this test's cluster gives no
// cause to exist (no fence, no notify rule, no skip, no missed fire).
var notExercised = []string{"kira_fenced_total", "kira_notifications_total", "kira_fires_skipped_total", "kira_fires_missed_total"}

// checkDocumentedMetrics: every series docs/operations.md lists reaches
// Prometheus with exactly the labels it documents (besides job, instance
// and a histogram's le), but those the cluster gives no cause to exist.
func checkDocumentedMetrics(t *testing.T, prom *promServer) {
	t.Helper()
	for name, labels := range documentedSeries(t) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		series, _, err := prom.api.Series(ctx, []string{fmt.Sprintf(`{__name__=~%q}`, name+"|"+name+"_bucket|"+name+"_count")}, time.Now().Add(-time.Minute), time.Now())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(series) == 0 {
			if !slices.Contains(notExercised, name) {
				t.Errorf("%s: documented, not in Prometheus", name)
			}
			continue
		}
		for _, s := range series {
			var got []string
			for l := range s {
				if !slices.Contains([]model.LabelName{model.MetricNameLabel, "job", "instance", "le"}, l) {
					got = append(got, string(l))
				}
			}
			if sort.Strings(got); !slices.Equal(got, sortedCopy(labels)) {
				t.Errorf("%s: labels %v in Prometheus, %v in the docs", s, got, labels)
			}
		}
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	sort.Strings(c)
	return c
}

// checkDocumentedQueries runs the queries docs/operations.md shows, on the
// healthy cluster, against what it says they return.
func checkDocumentedQueries(t *testing.T, prom *promServer) {
	t.Helper()
	slots := prom.mustQuery(t, `sum by (kira_job, partition) (kira_slot_leader)`)
	perSlot := map[string]float64{}
	for _, s := range slots {
		perSlot[string(s.Metric["kira_job"])+"/"+string(s.Metric["partition"])] = float64(s.Value)
	}
	want := map[string]float64{"reconcile/0": 1}
	for p := range 6 {
		want[fmt.Sprintf("sweep/%d", p)] = 1
	}
	if !mapsEqual(perSlot, want) {
		t.Errorf("kira_slot_leader summed per slot: %v, want each slot once: %v", perSlot, want)
	}
	for q, wantVec := range map[string]map[string]float64{
		`max by (kira_job) (kira_job_partitions)`:       {"sweep": 6, "reconcile": 1},
		`max by (kira_job) (kira_job_period_seconds)`:   {"sweep": 2, "reconcile": 3},
		`max by (kira_job) (kira_job_eligible_members)`: {"sweep": 3, "reconcile": 3},
	} {
		if got := byLabel(prom.mustQuery(t, q), "kira_job"); !mapsEqual(got, wantVec) {
			t.Errorf("%s: %v, want %v", q, got, wantVec)
		}
	}
	for _, q := range []string{`sum by (kira_job, partition) (kira_slot_leader) > 1`, `max(kira_etcd_alarm{alarm="NOSPACE"}) == 1`,
		`max(kira_etcd_revision_rollback_holding) == 1`} {
		if vec := prom.mustQuery(t, q); len(vec) != 0 {
			t.Errorf("%s on a healthy cluster: %v, want nothing", q, vec)
		}
	}
	for _, s := range prom.mustQuery(t, `kira_lease_trust_seconds / kira_lease_ttl_seconds`) {
		if s.Value < 1.0/3 || s.Value > 5.0/6 {
			t.Errorf("trust left / TTL of %s: %v, want between 1/3 and 5/6", s.Metric["instance"], s.Value)
		}
	}
	next := prom.mustQuery(t, `min by (kira_job) (kira_job_next_fire_timestamp_seconds) - time()`)
	if n := byLabel(next, "kira_job"); len(n) != 2 || n["reconcile"] < -2 || n["reconcile"] > 4 {
		t.Errorf("time to the next fire: %v, want reconcile's within its 3 s period", n)
	}
}

func mapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// killMostLoaded kills -9 the member leading the most slots; the leader
// rule's expression then names a job in kira_job (its slots without a
// leader until the member's lease expires), and is empty again once the
// others have taken them over.
func killMostLoaded(t *testing.T, prom *promServer, members map[string]*proc, leaderExpr string) {
	t.Helper()
	var most string
	var slots float64
	for inst, n := range byLabel(prom.mustQuery(t, `sum by (instance) (kira_slots_led)`), "instance") {
		if n > slots {
			most, slots = inst, n
		}
	}
	if members[most] == nil {
		t.Fatalf("the member leading the most slots is %q, not one of ours", most)
	}
	members[most].Signal(syscall.SIGKILL)
	named := map[string]bool{}
	kiratest.WaitUntil(t, "the leader rule to name the jobs whose slots the dead member led", 30*time.Second, func() bool {
		for _, s := range prom.mustQuery(t, leaderExpr) {
			if _, ok := s.Metric["job"]; ok {
				t.Fatalf("the leader rule's result %v has the scrape's job label", s.Metric)
			}
			named[string(s.Metric["kira_job"])] = true
		}
		return named["sweep"] || named["reconcile"]
	})
	kiratest.WaitUntil(t, "the slots taken over: the leader rule empty again", 60*time.Second, func() bool {
		return len(prom.mustQuery(t, leaderExpr)) == 0 && ledAsPartitioned(prom)
	})
	t.Logf("killed %s (%v slots); the leader rule named %v until they were taken over", most, slots, named)
}
