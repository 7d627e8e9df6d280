package client_test

import (
	"context"
	"testing"

	"github.com/kira-scheduler/kira/api"
	"github.com/kira-scheduler/kira/client"
	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
)

// A config.Job with only what matters set is created with the catalog's
// defaults; one read with Job (its Spec) and put back is unchanged; the
// YAML definition's revision is the job's.
func TestPutJobConfig(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	storeCatalog(t, cli, "cluster: client\njobs:\n  - {name: tick, schedule: '@hourly', command: ['true']}\n")
	c := newClient(t, serveAPI(t, cli, api.Config{}, nil), nil, client.WithToken(token))
	ctx := context.Background()

	j := config.Job{Schedule: "@every 5m", Command: []string{"./bill", "42"}, Env: map[string]string{"CUSTOMER": "42"}}
	w, err := c.PutJobConfig(ctx, "customer-42", j, client.JobWriteOptions{CreateOnly: true})
	if err != nil || !w.Created {
		t.Fatalf("create from a config.Job: %+v, %v", w, err)
	}
	d, err := c.Job(ctx, "customer-42")
	if err != nil || d.Spec.Partitions != 1 || d.Spec.HistoryLimit == 0 || d.Spec.Env["CUSTOMER"] != "42" {
		t.Fatalf("stored: %+v, %v", d, err)
	}
	again, err := c.PutJobConfig(ctx, "customer-42", d.Spec, client.JobWriteOptions{IfRevision: w.Revision})
	if err != nil || !again.Unchanged || again.Revision != w.Revision {
		t.Fatalf("put back as read: %+v, %v", again, err)
	}
	y, rev, err := c.DefinitionYAML(ctx, "customer-42")
	if err != nil || rev != w.Revision || len(y) == 0 {
		t.Fatalf("the YAML definition: %d %s, %v", rev, y, err)
	}
	if w, err := c.PutJob(ctx, "customer-42", y, client.JobWriteOptions{IfRevision: rev}); err != nil || !w.Unchanged {
		t.Fatalf("the YAML put back: %+v, %v", w, err)
	}
}
