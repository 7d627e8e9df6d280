package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/kira-scheduler/kira/config"
)

// BodyFile is the file name problems of a PUT /v1/catalog body are located in.
const BodyFile = "<body>"

// CatalogApplied answers PUT /v1/catalog: what kira apply -o json answers,
// and the warnings of the catalog (valid, but failing where it is checked).
type CatalogApplied struct {
	config.Applied
	Warnings []string `json:"warnings"`
}

// Problem is one problem of a refused catalog, located in the body.
type Problem struct {
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// CatalogRefused is the 422 answer to an invalid catalog: every problem
// found, as kira validate lists them (Error) and one by one (Problems).
type CatalogRefused struct {
	Error    string    `json:"error"`
	Problems []Problem `json:"problems"`
}

// refusedCatalog is the 422 answer to invalid: every problem, located.
func refusedCatalog(invalid *config.Error) error {
	refused := CatalogRefused{Error: invalid.Error(), Problems: []Problem{}}
	for _, p := range invalid.Problems {
		refused.Problems = append(refused.Problems, Problem{Line: p.Line, Column: p.Column, Field: p.Field, Message: p.Message})
	}
	return &statusError{code: http.StatusUnprocessableEntity, msg: refused.Error, body: refused}
}

// putCatalog stores the body's catalog YAML as kira apply -f does, through
// config.ApplyWith: the same checks, the same conflict rule (its revision:,
// else the catalog read just before; force=true stores anyway), dry_run=true
// writes nothing and answers the changes; jobs of other managers are kept
// unless prune_others=true, and one the body names is a 409 unless
// force_conflicts=true (TestPutCatalog, TestPutCatalogKeepsJobsMadeOneByOne).
func (s *server) putCatalog(ctx context.Context, r *http.Request) (any, error) {
	dryRun, err := boolParam(r, "dry_run")
	if err != nil {
		return nil, err
	}
	opt := config.ApplyOptions{DryRun: dryRun}
	for name, v := range map[string]*bool{"force": &opt.Force, "force_conflicts": &opt.ForceConflicts, "prune_others": &opt.PruneOthers} {
		if *v, err = boolParam(r, name); err != nil {
			return nil, err
		}
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	cat, warnings, err := config.Lint(BodyFile, data)
	if open, ok := config.UnresolvedCatalog(err); ok {
		cat, err = open, nil // after: jobs of other managers, which the write resolves
	}
	var invalid *config.Error
	if errors.As(err, &invalid) {
		return nil, refusedCatalog(invalid)
	}
	if err != nil {
		return nil, err
	}
	if cat.Cluster != s.cfg.Cluster {
		return nil, errorf(http.StatusBadRequest, "the catalog is of cluster %q (its cluster: field, %q when absent); this member serves cluster %q", cat.Cluster, config.DefaultCluster, s.cfg.Cluster)
	}
	res, err := config.ApplyWith(ctx, s.cfg.KV, cat, config.Source{By: config.ByAPI, At: time.Now().UTC()}, opt)
	var conflict *config.ConflictError
	var held *config.ManagerConflictError
	switch {
	case errors.As(err, &held):
		return nil, errorf(http.StatusConflict, "%v; PUT with force_conflicts=true to take it over", err)
	case errors.As(err, &invalid):
		return nil, refusedCatalog(invalid)
	}
	if errors.As(err, &conflict) {
		return nil, errorf(http.StatusConflict, "%v; nothing written.\n%sRead the catalog again (GET /v1/status has its revision; kira catalog -o yaml writes it as revision:), make the change there and PUT it; or PUT with force=true to overwrite the change made meanwhile.",
			conflict, config.Meanwhile(ctx, s.cfg.KV, cat, conflict))
	}
	if errors.Is(err, config.ErrUnreadableCatalog) {
		return nil, errorf(http.StatusConflict, "%v: this member's version of Kira cannot read the stored catalog, so it cannot compare or diff; nothing written", err)
	}
	if err != nil {
		return nil, err
	}
	out := CatalogApplied{Applied: *res, Warnings: []string{}}
	for _, w := range warnings {
		out.Warnings = append(out.Warnings, w.String())
	}
	return out, nil
}

// boolParam reads the query parameter name: false when absent.
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errorf(http.StatusBadRequest, "%s=%q: want true or false", name, v)
	}
	return b, nil
}
