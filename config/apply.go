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

// Apply stores cat (stored by src) unless it is the stored one, dryRun
// says not to, or the stored catalog is no longer the one cat was compared
// against, and force is not given: cat's Revision (its revision: field), else
// the catalog read here just before, checked again in the write's transaction
// (Put). A conflict is a *ConflictError and nothing is written. kira apply and
// PUT /v1/catalog both store through it (TestConcurrentAppliesFromOneReadConflict
// in cmd/kira, TestPutCatalog in package api).
func Apply(ctx context.Context, kv clientv3.KV, cat *Catalog, src Source, dryRun, force bool) (*Applied, error) {
	stored, err := Read(ctx, kv, cat.Cluster, 0)
	var prev *Catalog
	var rev int64
	switch {
	case errors.Is(err, ErrNoCatalog):
		stored = nil
	case err != nil:
		return nil, err
	default:
		prev, rev = stored.Catalog, stored.Revision
	}
	res := &Applied{Cluster: cat.Cluster, Changes: []string{}, Revision: rev, DryRun: dryRun}
	for _, ch := range Diff(prev, cat) {
		res.Changes = append(res.Changes, ch.String())
	}
	if len(res.Changes) == 0 {
		return res, nil
	}
	expected := rev
	switch {
	case force:
		expected = Force
	case cat.Revision != 0 && cat.Revision != rev:
		current, err := Read(ctx, kv, cat.Cluster, 0)
		if err != nil {
			return nil, err
		}
		return nil, &ConflictError{Expected: cat.Revision, Current: current}
	}
	if dryRun {
		return res, nil
	}
	if res.Revision, err = putOver(ctx, kv, cat, src, expected, stored); err != nil {
		return nil, err
	}
	res.Written = true
	return res, nil
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
