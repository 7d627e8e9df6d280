package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kira-scheduler/kira/api"
	"github.com/kira-scheduler/kira/config"
)

// One job is its own object (docs/catalog.md, "Writing one job"): read it
// with its revision (Definition), create or replace it (PutJob), delete
// it (DeleteJob); a revision read makes the next write conditional
// (JobWriteOptions.IfRevision), so two writers never overwrite each
// other unseen.

// JobWriteOptions are PutJob's and DeleteJob's conditions; the zero value
// writes whatever is stored, if the caller manages the job or nobody does.
type JobWriteOptions struct {
	// IfRevision, if set, writes only if the job is at that revision
	// (Definition's, or a write's JobWritten.Revision): else a 412
	// (IsPreconditionFailed) whose *Error has the revision now and what
	// changed since.
	IfRevision int64
	// CreateOnly writes only if the job is not stored (PutJob only):
	// else a 412.
	CreateOnly bool
	// Force takes over a job another manager holds (kira apply's, or
	// another credential's): else a 409 naming the manager.
	Force bool
}

// query and header are o as the API reads them.
func (o JobWriteOptions) request(method, path string) request {
	r := request{method: method, path: path, query: url.Values{}, header: http.Header{}}
	if o.Force {
		r.query.Set("force", "true")
	}
	if o.IfRevision != 0 {
		r.header.Set("If-Match", strconv.Quote(strconv.FormatInt(o.IfRevision, 10)))
	}
	if o.CreateOnly {
		r.header.Set("If-None-Match", "*")
	}
	return r
}

// Definition reads the job as stored (GET /v1/jobs/{job}/definition): in
// the catalog's schema (Job, JSON that PutJob takes back unchanged), its
// revision and its manager. A reader without credentials sees its secrets
// redacted. It is not decoded into a config.Job here: the catalog's
// validator makes one under the stored catalog's settings (its pools, its
// notify default), which a client does not have; Job answers the job as
// the member decoded it (JobDetail.Spec).
func (c *Client) Definition(ctx context.Context, job string) (*api.JobDefinition, error) {
	return call[*api.JobDefinition](ctx, c, http.MethodGet, jobPath(job, "definition"), nil, nil)
}

// DefinitionYAML reads the job as stored in YAML, every setting spelled
// out, to edit and PutJob back; revision is its ETag.
func (c *Client) DefinitionYAML(ctx context.Context, job string) (yaml []byte, revision int64, err error) {
	path := jobPath(job, "definition")
	resp, err := c.do(ctx, request{method: http.MethodGet, path: path, query: url.Values{"format": {"yaml"}}})
	if err != nil {
		return nil, 0, err
	}
	rev, err := etagRevision(resp.header)
	if err != nil {
		return nil, 0, fmt.Errorf("client: GET %s: %w", path, err)
	}
	return resp.body, rev, nil
}

// etagRevision is the job revision of an answer's ETag.
func etagRevision(h http.Header) (int64, error) {
	tag := h.Get("ETag")
	rev, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(tag, "W/"), `"`), 10, 64)
	if err != nil || rev <= 0 {
		return 0, fmt.Errorf("ETag %q is not a job revision", tag)
	}
	return rev, nil
}

// PutJob creates or replaces the job from body, one entry of a catalog's
// jobs: in YAML or JSON (name: may be left out; one that differs from job
// is refused), as the caller's manager (PUT /v1/jobs/{job}). The answer
// has the job's new revision, for the next write's IfRevision. An invalid
// job is a 422 whose *Error locates each problem (Problems). A write may
// have applied when an error other than an *Error comes back (no answer):
// read the Definition before writing again, or write with IfRevision.
func (c *Client) PutJob(ctx context.Context, job string, body []byte, opt JobWriteOptions) (*api.JobWritten, error) {
	req := opt.request(http.MethodPut, jobPath(job))
	req.body = body
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	var out api.JobWritten
	if err := decode(req.method, req.path, resp.body, &out); err != nil {
		return nil, err
	}
	if out.Revision == 0 {
		if out.Revision, err = etagRevision(resp.header); err != nil {
			return nil, fmt.Errorf("client: PUT %s: %w", req.path, err)
		}
	}
	return &out, nil
}

// PutJobConfig is PutJob of j, written as config.MarshalJobJSON writes
// it; j.Name, if set, must be job. Partitions and HistoryLimit at 0 are
// left out, so they take the catalog's defaults, as the other settings
// at their zero value do; a job read with Job (JobDetail.Spec) is written
// back as it is stored, but that a job on its catalog's notify default is
// written with those rules as its own (TestPutJobConfig).
func (c *Client) PutJobConfig(ctx context.Context, job string, j config.Job, opt JobWriteOptions) (*api.JobWritten, error) {
	body, err := jobBody(j)
	if err != nil {
		return nil, fmt.Errorf("client: PutJobConfig %s: %w", job, err)
	}
	return c.PutJob(ctx, job, body, opt)
}

// jobBody is j as PutJobConfig sends it.
func jobBody(j config.Job) ([]byte, error) {
	body, err := config.MarshalJobJSON(j)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, err
	}
	for _, name := range []string{"partitions", "history_limit"} { // never valid at 0: the catalog's default
		if string(fields[name]) == "0" {
			delete(fields, name)
		}
	}
	return json.Marshal(fields)
}

// DeleteJob deletes the job (DELETE /v1/jobs/{job}), on opt's conditions
// but CreateOnly. Jobs that run after it are a 409; no such job a 404.
// The answer's Revision is the catalog's after the delete.
func (c *Client) DeleteJob(ctx context.Context, job string, opt JobWriteOptions) (*api.JobWritten, error) {
	if opt.CreateOnly {
		return nil, fmt.Errorf("client: DeleteJob %s: CreateOnly is a put's condition", job)
	}
	req := opt.request(http.MethodDelete, jobPath(job))
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	var out api.JobWritten
	if err := decode(req.method, req.path, resp.body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
