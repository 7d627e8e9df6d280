package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"time"

	"github.com/kira-scheduler/kira"
	"github.com/kira-scheduler/kira/api"
	"github.com/kira-scheduler/kira/client"
	"github.com/kira-scheduler/kira/config"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A service that signs up customers creates one job per customer, reads
// it back with its revision, changes it only if nobody changed it since,
// and deletes it when the customer leaves.
func Example() {
	url, stop := startMember("example-token-0123456789")
	defer stop()
	ctx := context.Background()
	c, err := client.New(url, client.WithToken("example-token-0123456789"))
	if err != nil {
		log.Fatal(err)
	}

	// Create the customer's job; CreateOnly: a job of that name already
	// stored is a 412, not overwritten.
	w, err := c.PutJob(ctx, "customer-42", []byte("schedule: '@hourly'\ncommand: [./bill, '42']\n"), client.JobWriteOptions{CreateOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created:", w.Job, "managed by", w.Manager)

	// Read it as stored, with its revision.
	d, err := c.Definition(ctx, "customer-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("read at its revision:", d.Revision == w.Revision)

	// Replace it from a config.Job, on the revision read (If-Match).
	j := config.Job{Name: "customer-42", Schedule: "@daily", Partitions: 1, Command: []string{"./bill", "42"}}
	w2, err := c.PutJobConfig(ctx, "customer-42", j, client.JobWriteOptions{IfRevision: d.Revision})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("replaced, newer revision:", w2.Revision > d.Revision)

	// A writer still holding the old revision is refused: 412, with the
	// revision now and what changed since.
	_, err = c.PutJob(ctx, "customer-42", []byte("schedule: '@weekly'\ncommand: [./bill, '42']\n"), client.JobWriteOptions{IfRevision: d.Revision})
	var e *client.Error
	if errors.As(err, &e) && client.IsPreconditionFailed(err) {
		fmt.Println("stale write refused, stored at the replacement's revision:", e.Revision == w2.Revision)
		fmt.Println("changed since:", e.Differs)
	}

	// Delete it, on its revision.
	if _, err := c.DeleteJob(ctx, "customer-42", client.JobWriteOptions{IfRevision: w2.Revision}); err != nil {
		log.Fatal(err)
	}
	_, err = c.Definition(ctx, "customer-42")
	fmt.Println("deleted:", client.IsNotFound(err))
	// Output:
	// created: customer-42 managed by api:token
	// read at its revision: true
	// replaced, newer revision: true
	// stale write refused, stored at the replacement's revision: true
	// changed since: [schedule: @hourly → @daily]
	// deleted: true
}

// startMember serves a member's API, a catalog of one job stored, over an
// etcd of its own in a temporary directory, as kira run --http does;
// token is its --http-token-file's. stop shuts it all down.
func startMember(token string) (url string, stop func()) {
	dir, err := os.MkdirTemp("", "kira-client-example")
	if err != nil {
		log.Fatal(err)
	}
	endpoints, stopEtcd, err := kira.StartLocalEtcd(dir)
	if err != nil {
		log.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler(api.Config{KV: cli, Cluster: "shop", Auth: api.Auth{Token: []byte(token)}}))
	c, err := client.New(srv.URL, client.WithToken(token))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.PutCatalog(context.Background(), []byte("cluster: shop\njobs:\n  - {name: nightly-report, schedule: '@daily', command: [./report]}\n"), client.CatalogOptions{}); err != nil {
		log.Fatal(err)
	}
	return srv.URL, func() {
		srv.Close()
		cli.Close()
		stopEtcd()
		os.RemoveAll(dir)
	}
}
