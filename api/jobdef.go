package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/kira-scheduler/kira/config"
)

// The job-definition routes make one job its own object (docs/catalog.md,
// "Writing one job"): GET /v1/jobs/{job}/definition reads it as stored with its
// revision (also its ETag), PUT /v1/jobs/{job} creates or replaces it from
// one entry of a catalog's jobs: (YAML or JSON), DELETE /v1/jobs/{job}
// removes it; If-Match: <revision> makes a change conditional, If-None-Match: *
// makes a PUT create only, force=true takes over a job another manager
// holds. A change is the caller's (its manager is api:<identity>) and its
// scope must allow writing the job as stored and as it would be
// (TestJobDefinitionRoutes, TestJobDefinitionScopes).

// JobDefinition answers GET /v1/jobs/{job}/definition: the job in the
// catalog's schema (what PUT /v1/jobs/{job} takes), its revision and its
// manager. An anonymous reader sees its secrets redacted (redactSpec).
type JobDefinition struct {
	Job      json.RawMessage `json:"job"`
	Revision int64           `json:"revision"`
	Manager  string          `json:"manager"`
	// CatalogRevision is the stored catalog's revision it was read at.
	CatalogRevision int64 `json:"catalog_revision"`
}

// JobWritten answers PUT and DELETE /v1/jobs/{job}.
type JobWritten struct {
	Job string `json:"job"`
	// Revision is the job's new revision; a delete's is the catalog's.
	Revision int64 `json:"revision"`
	Created  bool  `json:"created,omitempty"`
	Deleted  bool  `json:"deleted,omitempty"`
	// Unchanged: the job was stored so already, by the same manager;
	// nothing was written.
	Unchanged bool   `json:"unchanged,omitempty"`
	Manager   string `json:"manager,omitempty"`
	// Previous is the manager a forced write took the job over from.
	Previous string `json:"previous_manager,omitempty"`
}

// JobPreconditionFailed is the 412 answer: the job's revision now (0: not
// stored) and what changed since the revision the request named.
type JobPreconditionFailed struct {
	Error    string   `json:"error"`
	Revision int64    `json:"revision"`
	Differs  []string `json:"differs,omitempty"`
}

// definition answers the job as stored, with its revision as the ETag;
// format=yaml answers the job alone in YAML, to edit and PUT back.
func (s *server) definition(ctx context.Context, r *http.Request) (any, error) {
	sj, err := s.jobWriter.GetJob(ctx, r.PathValue("job"))
	if err != nil {
		return nil, jobError(err)
	}
	j := sj.Job
	if !s.cfg.Auth.authenticated(r) {
		j = redactSpec(j)
	}
	switch r.URL.Query().Get("format") {
	case "yaml":
		y, err := config.MarshalJob(j)
		if err != nil {
			return nil, err
		}
		return tagged{code: http.StatusOK, etag: sj.Revision, raw: y, contentType: "application/yaml"}, nil
	case "", "json":
	default:
		return nil, errorf(http.StatusBadRequest, "format=%q: want json or yaml", r.URL.Query().Get("format"))
	}
	data, err := config.MarshalJobJSON(j)
	if err != nil {
		return nil, err
	}
	return tagged{code: http.StatusOK, etag: sj.Revision, body: JobDefinition{Job: data, Revision: sj.Revision,
		Manager: sj.Manager.String(), CatalogRevision: sj.CatalogRevision}}, nil
}

// putJob creates or replaces the job of the path from the body.
func (s *server) putJob(ctx context.Context, r *http.Request) (any, error) {
	name := r.PathValue("job")
	opt, err := s.jobOptions(ctx, r, name)
	if err != nil {
		return nil, err
	}
	if m := strings.TrimSpace(r.Header.Get("If-None-Match")); m != "" {
		if m != "*" {
			return nil, errorf(http.StatusBadRequest, "If-None-Match: %q: only * (create only) is understood", m)
		}
		opt.CreateOnly = true
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	w, err := s.jobWriter.PutJob(ctx, data, name, opt)
	if err != nil {
		return nil, jobError(err)
	}
	code := http.StatusOK
	if w.Created {
		code = http.StatusCreated
	}
	return tagged{code: code, etag: w.Revision, body: JobWritten{Job: w.Job, Revision: w.Revision, Created: w.Created,
		Unchanged: w.Unchanged, Manager: w.Manager.String(), Previous: string(w.Previous)}}, nil
}

// deleteJob deletes the job of the path, on the same conditions as putJob.
func (s *server) deleteJob(ctx context.Context, r *http.Request) (any, error) {
	name := r.PathValue("job")
	opt, err := s.jobOptions(ctx, r, name)
	if err != nil {
		return nil, err
	}
	rev, err := s.jobWriter.DeleteJob(ctx, name, config.DeleteJobOptions{Manager: opt.Manager,
		IfRevision: opt.IfRevision, Force: opt.Force, Check: opt.Check})
	if err != nil {
		return nil, jobError(err)
	}
	return JobWritten{Job: name, Revision: rev, Deleted: true}, nil
}

// jobOptions reads what PUT and DELETE share: the caller's manager,
// If-Match, force, and the scope check of the job as stored and as it
// would be, which the write asks before it commits.
func (s *server) jobOptions(ctx context.Context, r *http.Request, name string) (config.PutJobOptions, error) {
	id, ok := Caller(ctx)
	if !ok {
		return config.PutJobOptions{}, s.refuse(ctx, "a request without credentials may not write")
	}
	force, err := boolParam(r, "force")
	if err != nil {
		return config.PutJobOptions{}, err
	}
	opt := config.PutJobOptions{Manager: config.Manager(id.Manager()), Force: force,
		Check: func(stored, next *config.Job) error { return s.allowJob(ctx, verbWrite, name, stored, next) }}
	if m := strings.TrimSpace(r.Header.Get("If-Match")); m != "" {
		rev, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(m, "W/"), `"`), 10, 64)
		if err != nil || rev <= 0 {
			return opt, errorf(http.StatusBadRequest, "If-Match: %q is not a job revision (the ETag of GET /v1/jobs/{job}/definition)", m)
		}
		opt.IfRevision = rev
	}
	return opt, nil
}

// jobError is the answer to a single-job operation's error.
func jobError(err error) error {
	var (
		se      *statusError
		pre     *config.PreconditionError
		conf    *config.ManagerConflictError
		deps    *config.DependentsError
		invalid *config.Error
	)
	switch {
	case errors.As(err, &se):
		return err
	case errors.Is(err, config.ErrNoJob):
		return errorf(http.StatusNotFound, "%v", err)
	case errors.Is(err, config.ErrNoCatalog):
		return errorf(http.StatusNotFound, "%v: store a catalog first (kira apply -f, PUT /v1/catalog)", err)
	case errors.As(err, &pre):
		return &statusError{code: http.StatusPreconditionFailed, msg: pre.Error(), body: JobPreconditionFailed{Error: pre.Error(), Revision: pre.Stored, Differs: pre.Differs}}
	case errors.As(err, &conf), errors.As(err, &deps):
		return errorf(http.StatusConflict, "%v", err)
	case errors.As(err, &invalid):
		return refusedCatalog(invalid)
	case errors.Is(err, config.ErrInvalidJob):
		return errorf(http.StatusBadRequest, "%v", err)
	case errors.Is(err, config.ErrCatalogBusy), errors.Is(err, config.ErrOutcomeUnknown):
		return errorf(http.StatusServiceUnavailable, "%v", err)
	}
	return err
}
