package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/kira-scheduler/kira/config"
)

// authorize checks that the caller's scope allows the route's verb before
// h runs: on the job in the path for trigger and pause (its stored labels
// when the scope has a label selector), an unscoped caller for a
// whole-catalog write. For a route of verb write it checks the verb and
// the name in the path only: the route's handler must complete the check
// with allowJob, given the stored and the new definition
// (TestScopedTokens, TestAllowJob).
func (s *server) authorize(v verb, h handler) handler {
	return func(ctx context.Context, r *http.Request) (any, error) {
		var err error
		switch v {
		case verbCatalog:
			err = s.allowCatalog(ctx, r)
		case verbWrite:
			err = s.allowJob(ctx, v, r.PathValue("job"), nil, nil)
		default:
			err = s.allowStored(ctx, v, r.PathValue("job"))
		}
		if err != nil {
			return nil, err
		}
		return h(ctx, r)
	}
}

// allowStored checks v on the stored job name: by its name, and by its
// labels when the scope selects by labels (the only case that reads the
// catalog). A job not stored is decided by its name; the handler then
// answers 404.
func (s *server) allowStored(ctx context.Context, v verb, name string) error {
	id, _ := Caller(ctx)
	if id.scope == nil || len(id.scope.labels) == 0 {
		return s.allowJob(ctx, v, name, nil, nil)
	}
	stored, err := s.catalogs.Read(ctx, s.cfg.KV, s.cfg.Cluster, 0)
	if err != nil {
		return err
	}
	if j, ok := stored.Catalog.Job(name); ok {
		return s.allowJob(ctx, v, name, &j, nil)
	}
	return s.allowJob(ctx, v, name, nil, nil)
}

// allowJob is nil if the caller of ctx may do v to the job name, else a
// 403 naming the caller and what its scope lacks. stored is the job as
// stored and next its new definition, nil where there is none (a create
// has no stored job, a delete no new one): the labels of each that is set
// must match the scope's, so a scoped caller can neither act on a job
// outside its scope nor move one out of it. With neither, the name alone
// decides. Every route of verb write calls it with both (TestAllowJob).
func (s *server) allowJob(ctx context.Context, v verb, name string, stored, next *config.Job) error {
	id, ok := Caller(ctx)
	if !ok {
		return s.refuse(ctx, "a request without credentials may not write")
	}
	var labels []map[string]string
	for _, j := range []*config.Job{stored, next} {
		if j != nil {
			labels = append(labels, jobLabels(*j))
		}
	}
	if why := id.scope.refuses(v, name, labels...); why != "" {
		return s.refuse(ctx, fmt.Sprintf("%s may not %s job %s: %s", id, v, name, why))
	}
	return nil
}

// allowCatalog is nil if the caller of ctx may replace the whole catalog:
// an unscoped credential.
func (s *server) allowCatalog(ctx context.Context, r *http.Request) error {
	id, ok := Caller(ctx)
	if !ok {
		return s.refuse(ctx, "a request without credentials may not write")
	}
	if why := id.scope.refuses(verbCatalog, ""); why != "" {
		return s.refuse(ctx, fmt.Sprintf("%s may not %s %s: %s; a scoped credential acts on single jobs only", id, r.Method, r.URL.Path, why))
	}
	return nil
}

// refuse is the 403 of msg, noted for the write log.
func (s *server) refuse(ctx context.Context, msg string) error {
	noteRefused(ctx, msg)
	return errorf(http.StatusForbidden, "%s", msg)
}
