// Package kira runs a Kira member inside a Go service: the service's own
// functions are jobs of the catalog, and Run gives the process a whole
// member's life (join, run, rejoin after a lost lease, leave when ctx ends).
// See examples/embedded.
package kira // import "github.com/kira-scheduler/kira"

import (
	"context"
	"log/slog"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/etcdnode"
	"github.com/kira-scheduler/kira/internal/incarnation"
	"github.com/kira-scheduler/kira/internal/scheduler"
	"github.com/kira-scheduler/kira/jobs"
)

// Etcd says how to reach etcd, as kira run's flags of the same names do.
type Etcd struct {
	// Endpoints are the etcd client URLs; required.
	Endpoints []string
	// CACert verifies the servers' certificates; Cert and Key are this
	// client's, for etcd's --client-cert-auth.
	CACert, Cert, Key string
	// User is "name" or "name:password". Password or PasswordFile (whose
	// first line is the password) give the password when User has none.
	User, Password, PasswordFile string
	// DialTimeout defaults to 5 s.
	DialTimeout time.Duration
}

// Config is what a member needs: Etcd's endpoints, and Catalog or Cluster.
type Config struct {
	// Etcd says how to reach etcd.
	Etcd Etcd
	// Catalog, if set, is stored at start as kira run --catalog stores its
	// file (over nothing stored, or over a file-stored catalog of a lower
	// generation); either way the stored catalog of its Cluster runs.
	Catalog *config.Catalog
	// Cluster names the stored catalog to run when Catalog is nil.
	Cluster string
	// Name is the member's human-readable name; default the hostname.
	Name string
	// Labels are published in the member record, for the jobs' placement.
	Labels map[string]string
	// Handlers are the Go functions the catalog's jobs name (handler:).
	Handlers jobs.Handlers
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Run keeps a member of the cluster alive until ctx ends, then leaves and
// returns nil. A lost lease or an unreachable etcd is retried; an error no
// retry can cure (no catalog, etcd refusing this client) is returned.
func Run(ctx context.Context, cfg Config) error {
	e := cfg.Etcd
	return incarnation.Run(ctx, incarnation.Config{
		Etcd: etcdclient.Config{Endpoints: e.Endpoints, CACert: e.CACert, Cert: e.Cert, Key: e.Key,
			User: e.User, Password: e.Password, PasswordFile: e.PasswordFile, DialTimeout: e.DialTimeout},
		Catalog:   cfg.Catalog,
		Cluster:   cfg.Cluster,
		Name:      cfg.Name,
		Labels:    cfg.Labels,
		Logger:    cfg.Logger,
		Scheduler: scheduler.Config{Handlers: cfg.Handlers},
	})
}

// StartLocalEtcd starts a single-node etcd with its data in dir, on free
// loopback ports, as kira run does without --etcd. stop shuts it down.
func StartLocalEtcd(dir string) (endpoints []string, stop func(), err error) {
	e, err := etcdnode.StartLocal(dir, etcdnode.Production)
	if err != nil {
		return nil, nil, err
	}
	return etcdnode.ClientURLs(e), e.Close, nil
}
