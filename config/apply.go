package config

import (
	"context"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Applied is what Apply did: kira apply -o json and PUT /v1/catalog answer it.
type Applied struct {
	Cluster string   `json:"cluster"`
	Changes []string `json:"changes"` // Diff of the stored catalog and the new one
	Written bool     `json:"written"`
	// Revision is the stored catalog's: the new one when Written.
	Revision int64 `json:"revision"`
	DryRun   bool  `json:"dry_run"`
}

// ApplyOptions are Apply's: DryRun writes nothing; Force stores even if
// the stored catalog changed since cat was compared against it; the
// WholeOptions say what becomes of the jobs of other managers
// (kira apply --force-conflicts, --prune-others;
// PUT /v1/catalog?force_conflicts=&prune_others=).
type ApplyOptions struct {
	DryRun bool
	Force  bool
	WholeOptions
}

// Apply stores cat (stored by src) unless it is the stored one, dryRun
// says not to, or the stored catalog is no longer the one cat was compared
// against, and force is not given: cat's Revision (its revision: field), else
// the catalog read here just before, checked again in the write's transaction
// (Put). A conflict is a *ConflictError and nothing is written. kira apply and
// PUT /v1/catalog both store through it (TestConcurrentAppliesFromOneReadConflict
// in cmd/kira, TestPutCatalog in package api).
//
// A stored catalog this version cannot read (ErrUnreadableCatalog) is
// replaced only with force, and the changes say so first; without force it
// is an error and nothing is written (TestForcedApplyReplacesAnUnreadableCatalog).
func Apply(ctx context.Context, kv clientv3.KV, cat *Catalog, src Source, dryRun, force bool) (*Applied, error) {
	return ApplyWith(ctx, kv, cat, src, ApplyOptions{DryRun: dryRun, Force: force})
}

// ApplyWith is Apply with options. The jobs of other managers (api:<name>,
// cli:<name>) that cat lacks are kept, and its Changes say so ("kept 3
// jobs managed by api:signup"); a job of cat another manager holds is a
// *ManagerConflictError naming it, its manager and where cat has it, unless
// ForceConflicts takes it over (TestApplyKeepsJobsOfOtherManagers).
func ApplyWith(ctx context.Context, kv clientv3.KV, cat *Catalog, src Source, opt ApplyOptions) (*Applied, error) {
	stored, replaced, err := applyOver(ctx, kv, cat.Cluster, opt.Force)
	if err != nil {
		return nil, err
	}
	wh, err := combine(cat, src, stored, opt.WholeOptions)
	if err != nil {
		return nil, err
	}
	var prev *Catalog
	res := &Applied{Cluster: cat.Cluster, Changes: replaced, DryRun: opt.DryRun}
	if stored != nil {
		prev, res.Revision = stored.Catalog, stored.Revision
	}
	for _, ch := range Diff(prev, wh.cat) {
		res.Changes = append(res.Changes, ch.String())
	}
	if len(res.Changes) == 0 && len(wh.taken) == 0 {
		return res, nil
	}
	res.Changes = append(res.Changes, wh.notes()...)
	expected := res.Revision
	switch {
	case opt.Force:
		expected = Force
	case cat.Revision != 0 && cat.Revision != res.Revision:
		current, err := Read(ctx, kv, cat.Cluster, 0)
		if err != nil {
			return nil, err
		}
		return nil, &ConflictError{Expected: cat.Revision, Current: current}
	}
	if opt.DryRun {
		return res, nil
	}
	if res.Revision, err = putOver(ctx, kv, cat, src, expected, stored, opt.WholeOptions); err != nil {
		return nil, err
	}
	res.Written = true
	return res, nil
}

// applyOver reads the catalog Apply stores over: nil when none is stored;
// one it cannot read only with force, with the change that says it is
// replaced, unread (its Catalog is nil).
func applyOver(ctx context.Context, kv clientv3.KV, cluster string, force bool) (stored *Stored, replaced []string, err error) {
	stored, err = Read(ctx, kv, cluster, 0)
	switch {
	case errors.Is(err, ErrNoCatalog):
		return nil, []string{}, nil
	case errors.Is(err, ErrUnreadableCatalog) && stored != nil && force:
		return stored, []string{fmt.Sprintf("! the stored catalog (revision %d) is replaced whole, unread: %v", stored.Revision, err)}, nil
	case errors.Is(err, ErrUnreadableCatalog):
		return nil, nil, fmt.Errorf("%w; nothing written: only an apply with force replaces it, and what it holds is lost", err)
	case err != nil:
		return nil, nil, err
	}
	return stored, []string{}, nil
}

// Meanwhile describes, one line each, what changed in the stored catalog
// since the revision a conflicting cat was compared against; where that
// revision can no longer be read, what cat would change now.
func Meanwhile(ctx context.Context, kv clientv3.KV, cat *Catalog, e *ConflictError) string {
	var b strings.Builder
	list := func(changes []Change) {
		for _, ch := range changes {
			fmt.Fprintf(&b, "  %s\n", ch)
		}
	}
	switch {
	case e.Current == nil:
	case e.Current.Catalog == nil:
		fmt.Fprintf(&b, "The catalog stored now (revision %d) cannot be read by this version of Kira.\n", e.Current.Revision)
	case e.Expected <= 0:
		fmt.Fprintf(&b, "Stored meanwhile (revision %d):\n", e.Current.Revision)
		list(Diff(nil, e.Current.Catalog))
	default:
		if old, err := Read(ctx, kv, cat.Cluster, e.Expected); err != nil {
			fmt.Fprintf(&b, "The catalog of revision %d cannot be read any more (%v); what the new catalog would change now:\n", e.Expected, err)
			list(Diff(e.Current.Catalog, cat))
		} else {
			fmt.Fprintf(&b, "Changed meanwhile (revision %d → %d):\n", e.Expected, e.Current.Revision)
			list(Diff(old.Catalog, e.Current.Catalog))
		}
	}
	return b.String()
}
