package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/kira-scheduler/kira/api"
)

// CatalogOptions are PutCatalog's, as kira apply's flags of the same
// names; the zero value stores the catalog unless it changed since it was
// read, keeping the jobs of other managers.
type CatalogOptions struct {
	// DryRun writes nothing and answers the changes.
	DryRun bool
	// Force stores even if the stored catalog changed since the one the
	// body's revision: names (else since the member read it just before).
	Force bool
	// ForceConflicts takes over a job the body names that another manager
	// holds (else a 409).
	ForceConflicts bool
	// PruneOthers deletes the jobs of other managers the body does not
	// name (else they are kept).
	PruneOthers bool
}

// PutCatalog stores the catalog YAML of body, as kira apply -f does
// (PUT /v1/catalog). An invalid catalog is a 422 whose *Error lists every
// problem (Problems); one changed meanwhile, or naming another manager's
// job, a 409. The caller needs an unscoped credential.
func (c *Client) PutCatalog(ctx context.Context, body []byte, opt CatalogOptions) (*api.CatalogApplied, error) {
	v := url.Values{}
	for name, on := range map[string]bool{"dry_run": opt.DryRun, "force": opt.Force, "force_conflicts": opt.ForceConflicts, "prune_others": opt.PruneOthers} {
		if on {
			v.Set(name, "true")
		}
	}
	return call[*api.CatalogApplied](ctx, c, http.MethodPut, "/v1/catalog", v, body)
}
