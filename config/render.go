package config

import (
	"time"

	"github.com/goccy/go-yaml"
)

// Marshal writes cat in the catalog's YAML format, every setting in force
// spelled out (defaults included); Parse reads it back to an equal catalog
// (TestMarshalRoundTrips). kira catalog -o yaml prints it, so the stored
// catalog can be saved, edited and applied again.
func Marshal(cat *Catalog) ([]byte, error) {
	raw := rawCatalog{Cluster: cat.Cluster, Membership: rawMembership{LeaseTTL: durationText(cat.Membership.LeaseTTL)}, Notify: rawNotifyOf(cat.Notify), Pools: cat.Pools}
	if cat.Revision != 0 {
		raw.Revision = &cat.Revision
	}
	if cat.Generation != 0 {
		raw.Generation = &cat.Generation
	}
	for _, j := range cat.Jobs {
		raw.Jobs = append(raw.Jobs, rawOf(j, cat.Notify))
	}
	return yaml.MarshalWithOptions(raw, yaml.OmitEmpty(), yaml.IndentSequence(true), yaml.UseLiteralStyleIfMultiline(true))
}

// rawOf is j as the catalog writes it; notifyDefault is the catalog's
// notify rules.
func rawOf(j Job, notifyDefault []NotifyRule) rawJob {
	partitions, historyLimit := j.Partitions, j.HistoryLimit
	r := rawJob{Name: j.Name, Schedule: j.Schedule, Partitions: &partitions, Timeout: durationText(j.Timeout),
		Command: j.Command, Handler: j.Handler, FenceURL: j.FenceURL, FenceCommand: j.FenceCommand,
		Env: j.Env, PassEnv: j.PassEnv, Misfire: string(j.Misfire), CatchupWindow: durationText(j.CatchupWindow),
		HistoryLimit: &historyLimit, Overlap: string(j.Overlap), Jitter: durationText(j.Jitter), Timezone: j.Timezone,
		Retries: &rawRetries{Max: j.Retries.Max, Backoff: durationText(j.Retries.Backoff), MaxBackoff: durationText(j.Retries.MaxBackoff)}}
	if !j.NotifyDefault && (len(j.Notify) > 0 || len(notifyDefault) > 0) { // its own rules, or notify: [] to turn the default off
		rules := rawNotifyOf(j.Notify)
		r.Notify = &rules
	}
	if j.MaxRunning > 0 {
		n := j.MaxRunning
		r.MaxRunning = &n
	}
	r.Pool = j.Pool
	r.Labels = j.Labels
	r.After = rawUpstreamsOf(j.After)
	if j.Placement != nil {
		r.Placement = &rawPlacement{Labels: j.Placement.Labels}
	}
	if j.HTTP != nil {
		r.HTTP = &rawHTTP{URL: j.HTTP.URL, Method: j.HTTP.Method, Headers: j.HTTP.Headers, Body: j.HTTP.Body}
	}
	return r
}

// durationText is d as the catalog writes it ("" for zero: the field is left out).
func durationText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// MarshalJob writes j as one entry of a catalog's jobs: in YAML, every
// setting in force spelled out; PutJob reads it back to an equal job, so
// GET /v1/jobs/{job}/definition and kira job get -o yaml can be edited and
// put back (TestMarshalJobRoundTrips). A job that turned its catalog's
// notify default off, or has none, is written with notify: [].
func MarshalJob(j Job) ([]byte, error) {
	var off []NotifyRule
	if !j.NotifyDefault {
		off = []NotifyRule{{}} // any default: rawOf then writes the job's own rules, none included
	}
	return yaml.MarshalWithOptions(rawOf(j, off), yaml.OmitEmpty(), yaml.IndentSequence(true), yaml.UseLiteralStyleIfMultiline(true))
}

// MarshalJobJSON is MarshalJob in JSON: the same fields, as PUT
// /v1/jobs/{job} reads them.
func MarshalJobJSON(j Job) ([]byte, error) {
	y, err := MarshalJob(j)
	if err != nil {
		return nil, err
	}
	return yaml.YAMLToJSON(y)
}
