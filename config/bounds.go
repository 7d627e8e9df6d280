package config

import (
	"encoding/json"
	"fmt"

	"github.com/kira-scheduler/kira/internal/keyspace"
)

// Bounds of what a catalog stores in etcd (docs/security.md, "Catalog
// bounds"), under etcd's defaults: 1.5 MiB a request (--max-request-bytes)
// and 2 GiB a database (--quota-backend-bytes). The validator checks each
// of them as the store does, on the same encoding (storedValues), so kira
// validate refuses what kira apply and kira run would
// (TestValidatorRefusesWhatStoreRefuses, TestStoredBoundsAreTheValidators).
const (
	// MaxStoredCatalogBytes bounds the stored catalog, the keys and values of
	// its settings and of all its jobs: a staged store holds two generations
	// for a while, and every member reads the catalog whole at its start.
	// 100,000 one-line jobs store about 32 MB.
	MaxStoredCatalogBytes = 64 << 20
	// MaxPools bounds the catalog's pools, which its settings key holds.
	MaxPools = 1000
	// MaxURLBytes bounds a URL Kira calls (http.url, a notify webhook,
	// fence_url) as the catalog writes it: common servers refuse a request
	// line longer than 8 KiB.
	MaxURLBytes = 8 << 10
	// MaxHeaderNameBytes and MaxHeaderValueBytes bound each header of a
	// request Kira makes (an HTTP job's, a notify webhook's) as the catalog
	// writes it.
	MaxHeaderNameBytes  = 256
	MaxHeaderValueBytes = 128 << 10
)

// storedValues encodes cat as the per-job layout stores it with meta (nil:
// every job apply's, positioned in order) and calls put with each value, the settings first
// (job ""), one at a time. It stops at the first bound a value or the
// running total passes, with a *tooLargeError: the store and the validator
// both check through it, and the validator keeps no value.
func storedValues(cat *Catalog, meta []jobMeta, put func(job string, value []byte)) error {
	sets, err := json.Marshal(settingsOf(cat))
	if err != nil {
		return err
	}
	total := len(keyspace.CatalogSettings(cat.Cluster, 0)) + len(sets)
	if len(sets) > MaxTxnBytes {
		return &tooLargeError{index: -1, field: settingsField(cat), size: len(sets), limit: MaxTxnBytes}
	}
	put("", sets)
	if meta == nil {
		meta = metaOf(cat.Jobs, nil, ManagerApply)
	}
	for i, j := range cat.Jobs {
		v, err := json.Marshal(storedJob{Position: meta[i].pos, Job: j, Manager: meta[i].manager, Created: meta[i].created})
		if err != nil {
			return err
		}
		if len(v) > MaxTxnBytes {
			return &tooLargeError{index: i, job: j.Name, size: len(v), limit: MaxTxnBytes}
		}
		if total += len(keyspace.CatalogJob(cat.Cluster, 0, j.Name)) + len(v); total > MaxStoredCatalogBytes {
			return &tooLargeError{index: i, job: j.Name, size: total, limit: MaxStoredCatalogBytes, whole: true}
		}
		put(j.Name, v)
	}
	return nil
}

// settingsField is the field of the settings that takes most of their
// bytes, where the validator locates settings too large.
func settingsField(cat *Catalog) string {
	if len(encodeJSON(cat.Notify)) > len(encodeJSON(cat.Pools)) {
		return "notify"
	}
	return "pools"
}

// tooLargeError refuses a catalog too large to store: a job's value, the
// settings' (index -1), or the whole catalog once a job takes it over
// (whole). The store and the validator give it alike
// (TestValidatorRefusesWhatStoreRefuses).
type tooLargeError struct {
	index int // in the catalog's jobs; -1 for the settings
	job   string
	field string // of the settings
	size  int
	limit int
	whole bool
}

func (e *tooLargeError) Error() string { return "config: " + e.message() }

func (e *tooLargeError) message() string {
	switch {
	case e.index < 0:
		return fmt.Sprintf("the catalog's settings (cluster, membership, notify, pools) are %d bytes as stored, over the limit of %d (etcd refuses larger requests)", e.size, e.limit)
	case e.whole:
		return fmt.Sprintf("with job %s the catalog is %d bytes as stored (its settings and jobs, keys and values), over the limit of %d for the whole catalog", e.job, e.size, e.limit)
	}
	return fmt.Sprintf("job %s is %d bytes as stored, over the limit of %d (etcd refuses larger requests)", e.job, e.size, e.limit)
}

// path is where the validator locates e.
func (e *tooLargeError) path() fieldPath {
	if e.index < 0 {
		return root(e.field)
	}
	return root("jobs").index(e.index)
}
