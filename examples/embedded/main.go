// Command embedded runs Kira inside a Go service: the service's own function
// is a job, and kira.Run gives the process a whole member's life (join, run,
// rejoin after a lost lease, leave on SIGTERM).
//
//	go run ./examples/embedded --etcd http://127.0.0.1:2379
//
// Without --etcd it starts a single-node etcd of its own in a temporary
// directory, as kira run does. Run it three times against one etcd and the
// four partitions of "reconcile" spread over the three processes; kill one
// and its partitions move within the lease TTL.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kira-scheduler/kira"
	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/jobs"
)

const catalog = `cluster: embedded
membership:
  lease_ttl: 3s
jobs:
  - name: reconcile
    schedule: "@every 2s"
    partitions: 4
    handler: reconcile
`

func main() {
	etcd := flag.String("etcd", "", "comma-separated etcd endpoints; empty starts a local single-node etcd")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, strings.Split(*etcd, ","), slog.Default(), reconcile); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// reconcile is the service's own work for one partition. The execution in
// ctx carries the partition and the fencing token; a write to a protected
// resource passes the token along so a late ex-leader is refused.
func reconcile(ctx context.Context) error {
	e, _ := jobs.FromContext(ctx)
	slog.Info("reconciling", "partition", e.Partition, "of", e.Partitions, "token", e.Token.String(), "execution_id", e.ID)
	return nil
}

// run is main without the flags: a member until ctx ends.
func run(ctx context.Context, endpoints []string, logger *slog.Logger, work jobs.Handler) error {
	if len(endpoints) == 0 || endpoints[0] == "" {
		dir, err := os.MkdirTemp("", "kira-embedded")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		local, stop, err := kira.StartLocalEtcd(dir)
		if err != nil {
			return err
		}
		defer stop()
		endpoints = local
	}
	cat, err := config.Parse("embedded catalog", []byte(catalog))
	if err != nil {
		return err
	}
	return kira.Run(ctx, kira.Config{
		Etcd:     kira.Etcd{Endpoints: endpoints},
		Catalog:  cat,
		Logger:   logger,
		Handlers: jobs.Handlers{"reconcile": work},
	})
}
