package main

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// The Kubernetes manifests decode strictly with the Kubernetes API types,
// and agree with the binary: the container's args are kira run's flags, the
// probes reach /readyz and /livez on the --http port, the grace period is
// above --grace, the catalog comes from the ConfigMap and parses, etcd's
// endpoints and credentials from a Secret.
func TestKubernetesManifestsAgreeWithTheBinary(t *testing.T) {
	data, err := os.ReadFile("../../deploy/kubernetes/kira.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	var dep appsv1.Deployment
	var pdb policyv1.PodDisruptionBudget
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		target := map[string]any{"ConfigMap": &cm, "Deployment": &dep, "PodDisruptionBudget": &pdb}[meta.Kind]
		if target == nil {
			t.Fatalf("unexpected kind %q", meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), target); err != nil {
			t.Fatalf("%s: %v", meta.Kind, err)
		}
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
		t.Fatalf("replicas %v, want 3", dep.Spec.Replicas)
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Args[0] != "run" {
		t.Fatalf("args %v: not kira run", c.Args)
	}
	f, err := parseRunFlags(c.Args[1:])
	if err != nil {
		t.Fatalf("args %v are not kira run's flags: %v", c.Args[1:], err)
	}
	_, port, _ := strings.Cut(f.http.listenAddr(), ":")
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || itoa(c.Ports[0].ContainerPort) != port || !strings.HasPrefix(f.http.addr, "0.0.0.0:") {
		t.Fatalf("--http %s against port %+v: the probes need it on every interface, on the http port", f.http.addr, c.Ports)
	}
	for probe, want := range map[*corev1.Probe]string{c.ReadinessProbe: "/readyz", c.LivenessProbe: "/livez"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != "http" {
			t.Fatalf("probe %+v, want GET %s on the http port", probe, want)
		}
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= f.grace {
		t.Fatalf("terminationGracePeriodSeconds %v is not above --grace %s", g, f.grace)
	}
	mounted := ""
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name && path.Dir(f.catalog) == m.MountPath {
				mounted = path.Base(f.catalog)
			}
		}
	}
	cat, err := config.Parse("configmap", []byte(cm.Data[mounted]))
	if mounted == "" || err != nil {
		t.Fatalf("--catalog %s: not a key of ConfigMap %s mounted there, or it does not parse: %v", f.catalog, cm.Name, err)
	}
	if cat.Generation == 0 {
		t.Fatalf("the ConfigMap's catalog has no generation:, so a rollout of a changed file would never be stored")
	}
	fromSecret := map[string]bool{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			fromSecret[e.Name] = true
		}
	}
	for _, name := range []string{"KIRA_ETCD_ENDPOINTS", "KIRA_ETCD_USER", "KIRA_ETCD_PASSWORD"} {
		if !fromSecret[name] {
			t.Errorf("%s does not come from a Secret", name)
		}
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != dep.Spec.Template.Labels["app.kubernetes.io/name"] {
		t.Fatalf("the PodDisruptionBudget does not cover the Deployment's pods: %+v", pdb.Spec)
	}
}

// The systemd unit runs kira run with its flags, stops it with SIGTERM and
// waits longer than --grace; the Dockerfile builds a static binary run as a
// non-root user.
func TestSystemdUnitAndDockerfile(t *testing.T) {
	unit, err := os.Open("../../deploy/systemd/kira.service")
	if err != nil {
		t.Fatal(err)
	}
	defer unit.Close()
	keys := map[string]string{}
	sc := bufio.NewScanner(unit)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			keys[k] = v
		}
	}
	args := strings.Fields(keys["ExecStart"])
	if len(args) < 2 || args[1] != "run" {
		t.Fatalf("ExecStart %q is not kira run", keys["ExecStart"])
	}
	f, err := parseRunFlags(args[2:])
	if err != nil {
		t.Fatalf("ExecStart: %v", err)
	}
	stop, err := time.ParseDuration(keys["TimeoutStopSec"] + "s")
	if err != nil || stop <= f.grace || keys["KillSignal"] != "SIGTERM" {
		t.Fatalf("TimeoutStopSec %q, KillSignal %q: want SIGTERM and more than --grace %s", keys["TimeoutStopSec"], keys["KillSignal"], f.grace)
	}
	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CGO_ENABLED=0", "USER nonroot", "distroless/static"} {
		if !strings.Contains(string(docker), want) {
			t.Errorf("Dockerfile has no %q", want)
		}
	}
}

// parseRunFlags parses a kira run command line as kira run does, without
// running it.
func parseRunFlags(args []string) (runFlags, error) {
	var f runFlags
	c := &cli{}
	cmd := c.runCmdInto(&f)
	c.registerGlobal(cmd.PersistentFlags())
	err := cmd.ParseFlags(args)
	if err == nil && cmd.Flags().NArg() > 0 {
		err = fmt.Errorf("arguments %v", cmd.Flags().Args())
	}
	return f, err
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
