package client_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/api"
	"github.com/kira-scheduler/kira/client"
	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
)

// customersToken is a credential that may write the jobs named
// customer-* only.
const customersToken = "customers-token-0123456789abcdef"

// Each refusal of the API is an *Error its predicate names: 401 without
// the token, 403 outside the caller's scope, 404 no such job, 409 another
// manager's job, 412 with the revision now and what changed, 422 with
// every problem located; a body that is not the API's is still an *Error.
func TestErrors(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	storeCatalog(t, cli, "cluster: client\njobs:\n  - {name: tick, schedule: '@hourly', command: ['true']}\n")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "customers.token"), []byte(customersToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "unscoped.token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "credentials.yaml")
	if err := os.WriteFile(file, []byte(`tokens:
  - {name: customers, secret_file: customers.token, scope: {jobs: [customer-*], verbs: [write]}}
  - {name: admin, secret_file: unscoped.token}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	creds, err := api.LoadCredentials(file)
	if err != nil {
		t.Fatal(err)
	}
	srv := serveAPI(t, cli, api.Config{Auth: api.Auth{Credentials: creds}}, nil)
	ctx := context.Background()
	admin, customers := newClient(t, srv, nil, client.WithToken(token)), newClient(t, srv, nil, client.WithToken(customersToken))
	anonymous, wrong := newClient(t, srv, nil), newClient(t, srv, nil, client.WithToken("not-the-token-0123456789"))
	job := []byte("schedule: '@hourly'\ncommand: ['true']\n")

	w, err := customers.PutJob(ctx, "customer-1", job, client.JobWriteOptions{CreateOnly: true})
	if err != nil || !w.Created || w.Manager != "api:customers" {
		t.Fatalf("create: %+v, %v", w, err)
	}
	for _, tc := range []struct {
		what string
		err  error
		is   func(error) bool
		msg  string
	}{
		{"no token", only(anonymous.Pause(ctx, "tick")), client.IsUnauthorized, ""},
		{"a wrong token", only(wrong.Pause(ctx, "tick")), client.IsUnauthorized, ""},
		{"outside the scope", only(customers.PutJob(ctx, "billing", job, client.JobWriteOptions{})), client.IsForbidden, "billing"},
		{"no such job", only(admin.Definition(ctx, "nope")), client.IsNotFound, "nope"},
		{"no such execution", only(admin.Execution(ctx, "tick", "0123")), client.IsNotFound, "0123"},
		{"another manager's job", only(admin.PutJob(ctx, "customer-1", job, client.JobWriteOptions{})), client.IsConflict, "api:customers"},
		{"created again", only(customers.PutJob(ctx, "customer-1", job, client.JobWriteOptions{CreateOnly: true})), client.IsPreconditionFailed, ""},
		{"an invalid job", only(customers.PutJob(ctx, "customer-2", []byte("schedule: 'every hour'\ncommand: ['true']\n"), client.JobWriteOptions{})), client.IsInvalid, "schedule"},
		{"a bad query", only(admin.Executions(ctx, "tick", client.ExecutionsQuery{Outcome: "fine"})), client.IsInvalid, "outcome"},
	} {
		var e *client.Error
		if !errors.As(tc.err, &e) || !tc.is(tc.err) || !strings.Contains(e.Message, tc.msg) || len(e.Body) == 0 {
			t.Errorf("%s: %v", tc.what, tc.err)
		}
	}

	_, err = customers.PutJob(ctx, "customer-2", []byte("schedule: 'every hour'\ncommand: ['true']\n"), client.JobWriteOptions{})
	var invalid *client.Error
	if !errors.As(err, &invalid) || invalid.StatusCode != http.StatusUnprocessableEntity || len(invalid.Problems) != 1 ||
		invalid.Problems[0].Line != 1 || !strings.Contains(invalid.Problems[0].Field, "schedule") {
		t.Fatalf("an invalid job's problems: %+v", err)
	}

	w2, err := customers.PutJob(ctx, "customer-1", []byte("schedule: '@daily'\ncommand: ['true']\n"), client.JobWriteOptions{IfRevision: w.Revision})
	if err != nil {
		t.Fatal(err)
	}
	_, err = customers.PutJob(ctx, "customer-1", job, client.JobWriteOptions{IfRevision: w.Revision})
	var stale *client.Error
	if !errors.As(err, &stale) || !client.IsPreconditionFailed(err) || stale.Revision != w2.Revision || len(stale.Differs) == 0 {
		t.Fatalf("a write on an old revision: %+v", err)
	}
	_, err = customers.DeleteJob(ctx, "customer-1", client.JobWriteOptions{IfRevision: w.Revision})
	if !client.IsPreconditionFailed(err) {
		t.Fatalf("a delete on an old revision: %v", err)
	}
	if d, err := customers.DeleteJob(ctx, "customer-1", client.JobWriteOptions{IfRevision: w2.Revision}); err != nil || !d.Deleted {
		t.Fatalf("a delete on its revision: %+v, %v", d, err)
	}
	if s, err := config.Read(ctx, cli, "client", 0); err != nil || len(s.Catalog.Jobs) != 1 {
		t.Fatalf("stored after the writes: %+v, %v", s, err)
	}

	notAPI := serveAPI(t, cli, api.Config{}, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
		})
	})
	_, err = newClient(t, notAPI, nil).Status(ctx)
	var proxy *client.Error
	if !errors.As(err, &proxy) || proxy.StatusCode != http.StatusBadGateway || !strings.Contains(proxy.Message, "not the API's answer: <html>") {
		t.Fatalf("a proxy's answer: %v", err)
	}
}

// only is the error of a call's answer.
func only[T any](_ T, err error) error { return err }
