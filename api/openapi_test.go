package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/kira-scheduler/kira/internal/ops"
)

// openapi.yaml documents exactly the routes the API serves, each write
// action with the bearer security scheme.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	data, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Security []map[string][]string `yaml:"security"`
		} `yaml:"paths"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method, op := range ops {
			route := strings.ToUpper(method) + " " + path
			documented = append(documented, route)
			if (strings.HasPrefix(route, "POST") || strings.HasPrefix(route, "PUT")) && len(op.Security) == 0 {
				t.Errorf("%s: a write action without security", route)
			}
		}
	}
	served := Routes()
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Fatalf("openapi.yaml documents %v\nthe API serves %v", documented, served)
	}
}

// GET /v1/jobs and /v1/jobs/{job}: every field present, the slots of a job,
// the next fire after now and the next fires (upcoming).
func TestJobViews(t *testing.T) {
	cli := storedCatalog(t)
	srv := httptest.NewServer(Handler(Config{KV: cli, Cluster: "c"}))
	defer srv.Close()
	if err := ops.Pause(context.Background(), cli, "c", "tick"); err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if code := call(t, srv.Client(), "GET", srv.URL+"/v1/jobs", "", "", &list); code != 200 || len(list) != 1 {
		t.Fatalf("jobs: %d %v", code, list)
	}
	for _, field := range []string{"name", "schedule", "timezone", "partitions", "paused", "slots_led", "shares", "last_fire", "next_fire"} {
		if _, ok := list[0][field]; !ok {
			t.Errorf("job list: field %q absent", field)
		}
	}
	if list[0]["paused"] != true || list[0]["next_fire"] == nil {
		t.Fatalf("job list: %v", list[0])
	}
	var d ops.JobDetail
	if code := call(t, srv.Client(), "GET", srv.URL+"/v1/jobs/tick", "", "", &d); code != 200 || len(d.Slots) != 2 || d.Spec.Name != "tick" {
		t.Fatalf("job: %d %+v", code, d)
	}
	// The next fires as kira next lists them: the first is next_fire.
	if len(d.Upcoming) != ops.UpcomingFires || d.NextFire == nil || !d.Upcoming[0].Equal(*d.NextFire) || !d.Upcoming[1].After(d.Upcoming[0]) {
		t.Fatalf("job: upcoming %v, next fire %v", d.Upcoming, d.NextFire)
	}
	var e Error
	if code := call(t, srv.Client(), "GET", srv.URL+"/v1/jobs/nope", "", "", &e); code != http.StatusNotFound {
		t.Fatalf("unknown job: %d %+v", code, e)
	}
}
