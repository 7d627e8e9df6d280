package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// prometheusTool is the path of one of Debian's prometheus package's
// binaries (prometheus, promtool), which .ci/run installs: a test without
// it skips, and fails under CI.
func prometheusTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("no %s: .ci/run installs Debian's prometheus package", name)
	}
	t.Skipf("no %s (apt-get install prometheus)", name)
	return ""
}

// The shipped alert rules pass promtool's checks and its unit tests
// (deploy/prometheus/alerts_test.yaml: a healthy cluster fires nothing; a
// slot without a leader, a slot led twice, a job not succeeding for two
// periods, a lease running out and a member past capacity each fire with
// their labels), and the PrometheusRule for the Prometheus Operator holds
// the same groups, decoded strictly.
func TestAlertRulesUnderPromtool(t *testing.T) {
	promtool := prometheusTool(t, "promtool")
	const dir = "../../deploy/prometheus"
	if out, err := exec.Command(promtool, "check", "rules", filepath.Join(dir, "alerts.yaml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	cmd := exec.Command(promtool, "test", "rules", "alerts_test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	var file struct {
		Groups []map[string]any `json:"groups"`
	}
	readYAML(t, filepath.Join(dir, "alerts.yaml"), &file, false)
	var rule struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
		Spec       struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	readYAML(t, "../../deploy/kubernetes/prometheusrule.yaml", &rule, true)
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" || rule.Metadata.Name == "" {
		t.Fatalf("prometheusrule.yaml is %s %s %q, want a named monitoring.coreos.com/v1 PrometheusRule", rule.APIVersion, rule.Kind, rule.Metadata.Name)
	}
	if len(file.Groups) == 0 || !reflect.DeepEqual(rule.Spec.Groups, file.Groups) {
		t.Fatalf("the PrometheusRule's groups differ from alerts.yaml's:\n%v\n%v", rule.Spec.Groups, file.Groups)
	}
}

// readYAML decodes the YAML file at path into v, strictly if asked.
func readYAML(t *testing.T, path string, v any, strict bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	decode := func(b []byte, v any) error { return yaml.Unmarshal(b, v) }
	if strict {
		decode = func(b []byte, v any) error { return yaml.UnmarshalStrict(b, v) }
	}
	if err := decode(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
