package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/config"
)

const putCatalogYAML = "cluster: c\n%sjobs:\n  - {name: tick, schedule: \"@every 1s\", partitions: 2, command: [\"true\"]}\n  - {name: report, schedule: \"@daily\", command: [\"true\"]}\n"

// PUT /v1/catalog stores as kira apply does: authenticated, dry_run=true
// answers the changes and writes nothing, a stale revision: is a 409 that
// says what changed meanwhile, an invalid catalog a 422 with every problem
// located in the body, and nothing but a valid, current catalog is stored.
func TestPutCatalog(t *testing.T) {
	cli := storedCatalog(t)
	ctx := context.Background()
	srv := httptest.NewServer(Handler(Config{KV: cli, Cluster: "c", Auth: Auth{Token: []byte("right-token")}}))
	defer srv.Close()
	c := srv.Client()
	_, rev0, err := config.LoadStored(ctx, cli, "c")
	if err != nil {
		t.Fatal(err)
	}
	revision := func() int64 {
		t.Helper()
		_, rev, err := config.LoadStored(ctx, cli, "c")
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	body := fmt.Sprintf(putCatalogYAML, "")
	var e Error
	if code := call(t, c, "PUT", srv.URL+"/v1/catalog", "", body, &e); code != http.StatusUnauthorized {
		t.Fatalf("without the token: %d %+v", code, e)
	}

	var res CatalogApplied
	if code := call(t, c, "PUT", srv.URL+"/v1/catalog?dry_run=true", "right-token", body, &res); code != 200 ||
		res.Written || !res.DryRun || len(res.Changes) != 1 || res.Changes[0] != "+ job report" || res.Revision != rev0 {
		t.Fatalf("dry run: %d %+v", code, res)
	}
	if revision() != rev0 {
		t.Fatal("the dry run wrote")
	}

	res = CatalogApplied{}
	if code := call(t, c, "PUT", srv.URL+"/v1/catalog", "right-token", body, &res); code != 200 || !res.Written || res.Revision <= rev0 {
		t.Fatalf("put: %d %+v", code, res)
	}
	stored, err := config.Read(ctx, cli, "c", 0)
	if err != nil || stored.Revision != res.Revision || len(stored.Catalog.Jobs) != 2 || stored.Source == nil || stored.Source.By != config.ByAPI {
		t.Fatalf("stored: %+v (%v)", stored, err)
	}
	rev1 := res.Revision

	// A catalog read at rev0 (its revision: field) is stale now.
	stale := fmt.Sprintf(putCatalogYAML, fmt.Sprintf("revision: %d\n", rev0))
	stale = strings.Replace(stale, "partitions: 2", "partitions: 3", 1)
	if code := call(t, c, "PUT", srv.URL+"/v1/catalog", "right-token", stale, &e); code != http.StatusConflict ||
		!strings.Contains(e.Error, "nothing written") || !strings.Contains(e.Error, "+ job report") {
		t.Fatalf("stale put: %d %+v", code, e)
	}
	if revision() != rev1 {
		t.Fatal("the stale put wrote")
	}
	res = CatalogApplied{}
	if code := call(t, c, "PUT", srv.URL+"/v1/catalog?force=true", "right-token", stale, &res); code != 200 || !res.Written {
		t.Fatalf("forced put: %d %+v", code, res)
	}
	rev2 := res.Revision

	var refused CatalogRefused
	bad := "cluster: c\njobs:\n  - name: tick\n    schedule: '61 * * * *'\n    command: [\"true\"]\n  - {name: tick, schedule: '@daily', command: [\"true\"]}\n"
	if code := call(t, c, "PUT", srv.URL+"/v1/catalog", "right-token", bad, &refused); code != http.StatusUnprocessableEntity ||
		len(refused.Problems) != 2 || refused.Problems[0].Line != 4 || refused.Problems[0].Field != "jobs[0].schedule" ||
		refused.Problems[1].Line != 6 || !strings.Contains(refused.Error, BodyFile+":4:") {
		t.Fatalf("invalid catalog: %d %+v", code, refused)
	}
	if code := call(t, c, "PUT", srv.URL+"/v1/catalog", "right-token", strings.Replace(body, "cluster: c", "cluster: other", 1), &e); code != http.StatusBadRequest || !strings.Contains(e.Error, `"other"`) {
		t.Fatalf("another cluster's catalog: %d %+v", code, e)
	}
	if code := call(t, c, "PUT", srv.URL+"/v1/catalog?dry_run=maybe", "right-token", body, &e); code != http.StatusBadRequest {
		t.Fatalf("dry_run=maybe: %d %+v", code, e)
	}
	huge := body + "# " + strings.Repeat("x", config.MaxCatalogBytes) + "\n"
	if code := call(t, c, "PUT", srv.URL+"/v1/catalog", "right-token", huge, &e); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the limit: %d %+v", code, e)
	}
	if revision() != rev2 {
		t.Fatal("a refused put wrote")
	}
	res = CatalogApplied{}
	if code := call(t, c, "PUT", srv.URL+"/v1/catalog", "right-token", stale, &res); code != 200 || res.Written || len(res.Changes) != 0 {
		t.Fatalf("put of the stored catalog: %d %+v", code, res)
	}
}

// A job under the body limit but over the stored one (JSON writes each
// '<' as \u003c) is a 422 with the figures for dry_run=true as for a write,
// and nothing is stored.
func TestPutCatalogOverTheStoredLimit(t *testing.T) {
	cli := storedCatalog(t)
	srv := httptest.NewServer(Handler(Config{KV: cli, Cluster: "c", Auth: Auth{Token: []byte("right-token")}}))
	defer srv.Close()
	_, rev, err := config.LoadStored(context.Background(), cli, "c")
	if err != nil {
		t.Fatal(err)
	}
	body := "cluster: c\njobs:\n  - name: large\n    schedule: '@hourly'\n    command: [\"true\"]\n    env: {MARKUP: '" + strings.Repeat("<", 200000) + "'}\n"
	for _, query := range []string{"?dry_run=true", ""} {
		var refused CatalogRefused
		code := call(t, srv.Client(), "PUT", srv.URL+"/v1/catalog"+query, "right-token", body, &refused)
		if code != http.StatusUnprocessableEntity || len(refused.Problems) != 1 || refused.Problems[0].Line != 3 || refused.Problems[0].Field != "jobs[0]" ||
			!strings.Contains(refused.Problems[0].Message, fmt.Sprintf("bytes as stored, over the limit of %d", config.MaxTxnBytes)) {
			t.Fatalf("PUT%s: %d %+v", query, code, refused)
		}
	}
	if _, now, err := config.LoadStored(context.Background(), cli, "c"); err != nil || now != rev {
		t.Fatalf("a refused catalog was stored: revision %d → %d (%v)", rev, now, err)
	}
}
