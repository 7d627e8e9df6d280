package config

import "time"

// Defaults applied to fields a catalog leaves out.
const (
	DefaultCluster    = "default"
	DefaultLeaseTTL   = 6 * time.Second
	DefaultPartitions = 1
	DefaultHTTPMethod = "POST"

	// MinLeaseTTL keeps at least 3 renewal intervals (a member renews every
	// TTL/3) inside a lease of whole seconds, so one slow round trip does not
	// flap leadership.
	MinLeaseTTL = 2 * time.Second
	// MaxPartitions bounds one job's slots; a larger job is almost surely a typo.
	MaxPartitions = 100000

	// MaxCatalogBytes bounds a catalog file (or directory) and the body of
	// PUT /v1/catalog: about 250,000 one-line jobs. As stored, each job is
	// a key of its own, held to MaxTxnBytes, and the whole to
	// MaxStoredCatalogBytes (bounds.go).
	MaxCatalogBytes = 16 << 20
	// MaxJobs bounds the jobs of one catalog.
	MaxJobs = 100000
	// MaxNameLength bounds cluster and job names (a DNS label's length).
	MaxNameLength = 63
	// MaxArgs and MaxArgBytes bound a command's argv (Linux allows far more,
	// but a catalog is read by every member at every change).
	MaxArgs     = 1024
	MaxArgBytes = 128 << 10

	// DefaultHistoryLimit is how many execution records each slot keeps in
	// etcd unless the job says otherwise (CronJob keeps 3 successful and 1
	// failed Job). Each record is a key: at 100 per slot, 10,000 slots made a
	// million keys, and the index lookup became the largest part of each etcd put.
	DefaultHistoryLimit = 10
	// MaxHistoryLimit bounds history_limit: record n of a slot goes to key
	// n mod the limit, written with three digits.
	MaxHistoryLimit = 999

	DefaultMisfire       = MisfireFireOnce
	DefaultCatchupWindow = 10 * time.Minute
	DefaultOverlap       = OverlapSkip
	DefaultRetryBackoff  = time.Second
	DefaultMaxBackoff    = time.Minute
)

// Misfire says what a new owner does with fires that fell into a gap in
// ownership (crash, partition, deploy).
type Misfire string

const (
	MisfireSkip     Misfire = "skip"      // run only future fires
	MisfireFireOnce Misfire = "fire-once" // one run for all missed fires (the latest)
	MisfireFireAll  Misfire = "fire-all"  // every missed fire, oldest first
)

// Overlap says what a fire does while the previous run of the same slot still runs.
type Overlap string

const (
	OverlapSkip    Overlap = "skip"    // skip the new fire (CronJob Forbid)
	OverlapQueue   Overlap = "queue"   // run it after the running one; at most one waits
	OverlapReplace Overlap = "replace" // cancel the running one, start the new one (CronJob Replace)
	OverlapAllow   Overlap = "allow"   // run both (CronJob Allow)
)

// Known reports whether o is one of the overlap policies.
func (o Overlap) Known() bool {
	switch o {
	case OverlapSkip, OverlapQueue, OverlapReplace, OverlapAllow:
		return true
	}
	return false
}

// Retries bounds how a failed execution is tried again, while the slot is held.
type Retries struct {
	Max        int           `json:"max"`
	Backoff    time.Duration `json:"backoff"`
	MaxBackoff time.Duration `json:"max_backoff"`
}

// Catalog is a validated set of jobs and the membership settings of the
// cluster that runs them.
type Catalog struct {
	// Cluster names the key space: every key lives under /kira/<cluster>/.
	Cluster    string     `json:"cluster"`
	Membership Membership `json:"membership"`
	Jobs       []Job      `json:"jobs"`
	// Notify is the catalog's default notify rules, which every job without
	// a notify: of its own has (Job.NotifyDefault). The store keeps them
	// once, in the catalog's settings, not in each job.
	Notify []NotifyRule `json:"notify,omitempty"`
	// Pools are the concurrency limits jobs share by name (Job.Pool): at
	// most Pools[name] of their runs at once across the cluster (Limit).
	Pools map[string]int `json:"pools,omitempty"`
	// Revision is the file's revision: (the catalog revision it was read
	// from, as kira catalog -o yaml writes it): kira apply stores the file
	// only while the stored catalog is still at that revision. 0: none.
	Revision int64 `json:"-"`
	// Generation is the file's generation:, which orders the --catalog
	// files of members (StoreFile). 0: none.
	Generation int64 `json:"-"`
	// unresolved are the after: targets a catalog read from files lacks,
	// which a whole write resolves against the stored jobs it keeps
	// (UnresolvedCatalog); none in a valid catalog.
	unresolved []unresolvedAfter
}

// Membership holds the settings of every member's etcd session.
type Membership struct {
	// LeaseTTL is the TTL of each member's etcd lease; it is renewed every LeaseTTL/3.
	LeaseTTL time.Duration `json:"lease_ttl"`
}

// Job is one schedulable unit of work, split into Partitions slots.
type Job struct {
	Name       string        `json:"name"`
	Schedule   string        `json:"schedule"`
	Partitions int           `json:"partitions"`
	Timeout    time.Duration `json:"timeout,omitempty"` // 0: no timeout
	// Exactly one of Command, HTTP and Handler is set.
	Command []string  `json:"command,omitempty"`
	HTTP    *HTTPSpec `json:"http,omitempty"`
	Handler string    `json:"handler,omitempty"`
	// FenceURL, if set, is called with each newly acquired token before the
	// slot's first execution, so the protected resource raises its fence.
	FenceURL string `json:"fence_url,omitempty"`
	// FenceCommand, if set, is run (argv, no shell) with the new token in its
	// environment before the slot's first execution; exit 0 means raised.
	FenceCommand []string `json:"fence_command,omitempty"`
	// Env is a command job's extra environment; its values may refer to the
	// member's variables as ${NAME} (see Expand).
	Env map[string]string `json:"env,omitempty"`
	// PassEnv names the member's variables a command job inherits beside
	// DefaultPassEnv.
	PassEnv []string `json:"pass_env,omitempty"`

	Misfire       Misfire       `json:"misfire"`
	CatchupWindow time.Duration `json:"catchup_window"`
	// HistoryLimit is how many execution records each slot of the job keeps
	// (the oldest is overwritten).
	HistoryLimit int     `json:"history_limit"`
	Overlap      Overlap `json:"overlap"`
	Retries      Retries `json:"retries"`
	// Jitter delays each fire by a fixed offset in [0, Jitter), derived from
	// the slot, so it is the same on every member.
	Jitter time.Duration `json:"jitter,omitempty"`
	// Timezone the schedule is read in (unless it says CRON_TZ=); default UTC.
	Timezone string `json:"timezone,omitempty"`
	// Notify is the job's notify rules in force: its own notify:, or the
	// catalog's when it has none (notify: [] turns them off).
	Notify []NotifyRule `json:"notify,omitempty"`
	// NotifyDefault says the job has no notify: of its own and the catalog
	// has a default: Notify is the catalog's Notify, the same rules, stored
	// once with the catalog's settings and written back out as no notify:
	// (Marshal).
	NotifyDefault bool `json:"-"`
	// Labels describe the job (team: growth), Kubernetes' syntax: scoped
	// API credentials select jobs by them (docs/security.md), kira jobs
	// and the API list them. They decide nothing about where it runs
	// (Placement does).
	Labels map[string]string `json:"labels,omitempty"`
	// Placement, if set, limits the job's slots to members with its labels.
	Placement *Placement `json:"placement,omitempty"`
	// MaxRunning, if set, lets at most that many of the job's slots run at
	// once across the cluster; Pool, if set, names the catalog's pool whose
	// limit the job shares instead (Catalog.Limit). Not both.
	MaxRunning int    `json:"max_running,omitempty"`
	Pool       string `json:"pool,omitempty"`
	// After, if set, makes the job a dependent: it has no schedule and
	// fires once for each fire of its upstream jobs (config/after.go).
	After []Upstream `json:"after,omitempty"`
	// CreateRevision is the etcd revision at which the job was created in
	// the stored catalog: a job deleted and created again under its name
	// has a new one, and its slots' state of before is its predecessor's
	// (the scheduler starts them afresh, docs/decisions/0048-a-deleted-job-is-swept.md).
	// Replacing the job keeps it, and so does a whole store that keeps the
	// job (storedJob.Created). 0 when unknown: a catalog not read from the
	// per-job layout. Held by TestAJobKeepsItsCreateRevisionUntilDeleted.
	CreateRevision int64 `json:"-"`
}

// ParsedSchedule returns the job's schedule in its time zone.
// A dependent job's never fires: it fires when its upstreams end.
func (j Job) ParsedSchedule() (Schedule, error) {
	if j.Dependent() {
		return never{}, nil
	}
	return ParseScheduleIn(j.Schedule, j.Timezone)
}

// HTTPSpec describes a request made for each execution of an HTTP job.
type HTTPSpec struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
}

// Job returns the job with the given name.
func (c *Catalog) Job(name string) (Job, bool) {
	for _, j := range c.Jobs {
		if j.Name == name {
			return j, true
		}
	}
	return Job{}, false
}
