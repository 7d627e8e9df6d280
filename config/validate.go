package config

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// namePattern is what a job's name must match.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Load reads and validates the catalog file at path.
func Load(path string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// Parse validates a catalog read from file (the name is used in errors only).
// It returns every problem found as an *Error.
func Parse(file string, data []byte) (*Catalog, error) {
	cat, _, err := lint(file, data, time.Time{})
	return cat, err
}

// Lint is Parse that also returns warnings: what is valid but will fail
// here, such as a ${NAME} reference to a variable this process's
// environment does not have (the members' must).
//
// Unlike Parse, it also checks what depends on the time of the check: a
// job whose @at time is past (pastAt).
func Lint(file string, data []byte) (*Catalog, []Problem, error) {
	return lint(file, data, time.Now())
}

// lint is Lint with the time of the check; zero skips the checks that
// depend on it (Parse: a member runs a catalog whose @at job is past).
func lint(file string, data []byte, now time.Time) (*Catalog, []Problem, error) {
	if len(data) > MaxCatalogBytes {
		return nil, nil, &Error{Problems: []Problem{{File: file, Message: fmt.Sprintf("the catalog is %d bytes, over the limit of %d", len(data), MaxCatalogBytes)}}}
	}
	raw, doc, err := decode(file, data)
	if err != nil {
		return nil, nil, err
	}
	v := validator{locate: doc.locator(file), now: now}
	return v.checked(v.catalog(raw))
}

// checked is lint's answer for cat, which v validated: with v's problems,
// an *Error; when they are only after: targets cat lacks, the Error holds
// cat for a write that resolves them against stored jobs
// (UnresolvedCatalog).
func (v *validator) checked(cat *Catalog) (*Catalog, []Problem, error) {
	if len(v.problems) == len(v.unresolved) {
		v.stored(cat)
	}
	if len(v.problems) == 0 {
		return cat, v.warnings, nil
	}
	e := &Error{Problems: v.problems}
	if len(v.problems) == len(v.unresolved) {
		cat.unresolved, e.open = v.unresolved, cat
	}
	return nil, v.warnings, e
}

// LoadLint is Lint of the file at path.
func LoadLint(path string) (*Catalog, []Problem, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	return Lint(path, data)
}

type validator struct {
	now      time.Time // see lint
	locate   locator
	problems []Problem
	warnings []Problem
	// unresolved are the problems of after: targets the catalog lacks.
	unresolved []unresolvedAfter
}

// warnf records a warning at path.
func (v *validator) warnf(path fieldPath, format string, args ...any) {
	v.warnings = append(v.warnings, v.locate.problem(path, fmt.Sprintf(format, args...)))
}

// references checks the ${NAME} references of s, at path: a malformed one
// is a problem, one this process's environment lacks a warning. It reports
// whether s has any.
func (v *validator) references(path fieldPath, s string) bool {
	names, err := References(s)
	if err != nil {
		v.addf(path, "%v", err)
		return true
	}
	for _, name := range names {
		if _, ok := os.LookupEnv(name); !ok {
			v.warnf(path, "${%s} is not set in this environment: every member must have it, or the job's executions fail", name)
		}
	}
	return len(names) > 0
}

func (v *validator) addf(path fieldPath, format string, args ...any) {
	v.problems = append(v.problems, v.locate.problem(path, fmt.Sprintf(format, args...)))
}

func (v *validator) catalog(raw rawCatalog) *Catalog {
	cat := &Catalog{Cluster: raw.Cluster, Membership: Membership{LeaseTTL: DefaultLeaseTTL}}
	cat.Revision = v.positive(root("revision"), raw.Revision, "the catalog revision the file was read from, as kira catalog -o yaml writes it")
	cat.Generation = v.positive(root("generation"), raw.Generation, "raise it with every change of a --catalog file rolled out to the members")
	if cat.Cluster == "" {
		cat.Cluster = DefaultCluster
	} else if !namePattern.MatchString(cat.Cluster) || len(cat.Cluster) > MaxNameLength {
		v.addf(root("cluster"), "%q is not a valid cluster name: use lower-case letters, digits and '-', starting with a letter or digit, at most %d characters", raw.Cluster, MaxNameLength)
	}
	if raw.Membership.LeaseTTL != "" {
		p := root("membership").child("lease_ttl")
		if ttl, ok := v.duration(p, raw.Membership.LeaseTTL); ok {
			switch {
			case ttl < MinLeaseTTL:
				v.addf(p, "lease_ttl %s is under the minimum of %s (renewals happen every ttl/3)", ttl, MinLeaseTTL)
			case ttl%time.Second != 0:
				v.addf(p, "lease_ttl %s must be a whole number of seconds (etcd leases have second granularity)", ttl)
			default:
				cat.Membership.LeaseTTL = ttl
			}
		}
	}
	if len(raw.Jobs) == 0 {
		v.addf(root("jobs"), "the catalog has no jobs: add at least one under jobs:")
	}
	if len(raw.Jobs) > MaxJobs {
		v.addf(root("jobs"), "the catalog has %d jobs, over the limit of %d", len(raw.Jobs), MaxJobs)
		return cat
	}
	cat.Notify = v.notify(root("notify"), raw.Notify)
	cat.Pools = v.pools(raw.Pools)
	seen := map[string]int{}
	for i, rj := range raw.Jobs {
		jp := root("jobs").index(i)
		j := v.job(jp, rj)
		v.limit(jp, rj, &j, raw.Pools)
		if j.Name != "" {
			if first, dup := seen[j.Name]; dup {
				v.addf(jp.child("name"), "duplicate job name %q (first defined at %s)", j.Name, v.locate.where(root("jobs").index(first).child("name")))
			} else {
				seen[j.Name] = i
			}
		}
		if rj.Notify == nil && len(cat.Notify) > 0 {
			j.Notify, j.NotifyDefault = cat.Notify, true
		}
		cat.Jobs = append(cat.Jobs, j)
	}
	v.graph(cat)
	return cat
}

// positive is *n, which must be a whole number of at least 1 when present;
// 0 when absent.
func (v *validator) positive(p fieldPath, n *int64, what string) int64 {
	if n == nil {
		return 0
	}
	if *n < 1 {
		v.addf(p, "%d is not valid: want a whole number of at least 1 (%s)", *n, what)
		return 0
	}
	return *n
}

func (v *validator) job(jp fieldPath, rj rawJob) Job {
	j := Job{Name: rj.Name, Schedule: rj.Schedule, Partitions: DefaultPartitions, Command: rj.Command, Handler: rj.Handler,
		Misfire: DefaultMisfire, CatchupWindow: DefaultCatchupWindow, HistoryLimit: DefaultHistoryLimit, Overlap: DefaultOverlap, Timezone: rj.Timezone,
		Retries: Retries{Backoff: DefaultRetryBackoff, MaxBackoff: DefaultMaxBackoff}}
	switch {
	case rj.Name == "":
		v.addf(jp, "name is required")
	case !namePattern.MatchString(rj.Name):
		v.addf(jp.child("name"), "%q is not a valid job name: use lower-case letters, digits and '-', starting with a letter or digit", rj.Name)
	case len(rj.Name) > MaxNameLength:
		v.addf(jp.child("name"), "job name %q is %d characters, over the limit of %d", rj.Name, len(rj.Name), MaxNameLength)
	}
	v.after(jp, rj, &j)
	if rj.Schedule == "" && rj.After == nil {
		v.addf(jp, "schedule is required (a cron expression such as \"*/5 * * * *\" or \"@every 10s\")")
	} else if rj.Schedule == "" {
		// A dependent (after:): it fires when its upstreams end.
	} else if _, err := ParseScheduleIn(rj.Schedule, rj.Timezone); err != nil {
		field := jp.child("schedule")
		if strings.Contains(err.Error(), "unknown time zone") && rj.Timezone != "" {
			field = jp.child("timezone")
		}
		v.addf(field, "%v", err)
	}
	v.semantics(jp, rj, &j)
	v.pastAt(jp, Misfire(rj.Misfire), j)
	if rj.Partitions != nil {
		if n := *rj.Partitions; n < 1 || n > MaxPartitions {
			v.addf(jp.child("partitions"), "partitions must be between 1 and %d, got %d", MaxPartitions, n)
		} else {
			j.Partitions = n
		}
	}
	if rj.Timeout != "" {
		if d, ok := v.duration(jp.child("timeout"), rj.Timeout); ok {
			if d <= 0 {
				v.addf(jp.child("timeout"), "timeout must be positive, got %s", d)
			}
			j.Timeout = d
		}
	}
	executors := 0
	if rj.Command != nil {
		executors++
		if len(rj.Command) == 0 || rj.Command[0] == "" {
			v.addf(jp.child("command"), "command needs at least a program: an argv list such as [\"sh\", \"-c\", \"echo hi\"]")
		}
		v.argv(jp.child("command"), rj.Command)
	}
	if rj.HTTP != nil {
		executors++
		j.HTTP = v.http(jp.child("http"), rj.HTTP)
	}
	if rj.FenceURL != "" {
		if !v.urlLength(jp.child("fence_url"), rj.FenceURL) && !isHTTPURL(rj.FenceURL) {
			v.addf(jp.child("fence_url"), "%q is not an absolute http(s) URL", rj.FenceURL)
		}
		j.FenceURL = rj.FenceURL
	}
	if rj.FenceCommand != nil {
		if len(rj.FenceCommand) == 0 || rj.FenceCommand[0] == "" {
			v.addf(jp.child("fence_command"), "fence_command needs at least a program: an argv list")
		}
		if rj.FenceURL != "" {
			v.addf(jp.child("fence_command"), "set fence_url or fence_command, not both")
		}
		v.argv(jp.child("fence_command"), rj.FenceCommand)
		j.FenceCommand = rj.FenceCommand
	}
	if rj.Handler != "" {
		executors++
	}
	v.environment(jp, rj, &j)
	if rj.Notify != nil {
		j.Notify = v.notify(jp.child("notify"), *rj.Notify)
	}
	j.Labels = v.labels(jp.child("labels"), rj.Labels)
	j.Placement = v.placement(jp.child("placement"), rj.Placement)
	switch {
	case executors == 0 && rj.Name != "":
		v.addf(jp, "job %q has no executor: set one of command, http or handler", rj.Name)
	case executors == 0:
		v.addf(jp, "job has no executor: set one of command, http or handler")
	case executors > 1:
		v.addf(jp, "job %q sets %d executors: set exactly one of command, http or handler", rj.Name, executors)
	}
	return j
}

func (v *validator) http(p fieldPath, rh *rawHTTP) *HTTPSpec {
	h := &HTTPSpec{URL: rh.URL, Method: strings.ToUpper(rh.Method), Headers: rh.Headers, Body: rh.Body}
	if h.Method == "" {
		h.Method = DefaultHTTPMethod
	}
	v.request(p, "url", rh.URL, rh.Headers, "http.url is required")
	v.references(p.child("body"), rh.Body)
	switch h.Method {
	case "GET", "POST", "PUT", "PATCH", "DELETE":
	default:
		v.addf(p.child("method"), "method %q is not one of GET, POST, PUT, PATCH, DELETE", rh.Method)
	}
	return h
}

// request checks the URL (field urlField of p) and the headers of a
// request Kira makes: an absolute http(s) URL, unless it refers to the
// member's environment (checked once expanded), and well-formed ${NAME}
// references.
func (v *validator) request(p fieldPath, urlField, url string, headers map[string]string, missing string) {
	switch {
	case url == "":
		v.addf(p, "%s", missing)
	case v.urlLength(p.child(urlField), url):
	case v.references(p.child(urlField), url):
		// Checked as a URL once the member has expanded it.
	case !isHTTPURL(url):
		v.addf(p.child(urlField), "%q is not an absolute http(s) URL", url)
	}
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		hp := p.child("headers").child(name)
		switch {
		case len(name) > MaxHeaderNameBytes:
			v.addf(hp, "the header name is %d bytes, over the limit of %d", len(name), MaxHeaderNameBytes)
		case len(headers[name]) > MaxHeaderValueBytes:
			v.addf(hp, "the header's value is %d bytes, over the limit of %d", len(headers[name]), MaxHeaderValueBytes)
		default:
			v.references(hp, headers[name])
		}
	}
}

// urlLength refuses a URL over MaxURLBytes at p, and reports whether it did.
func (v *validator) urlLength(p fieldPath, url string) bool {
	if len(url) <= MaxURLBytes {
		return false
	}
	v.addf(p, "the URL is %d bytes, over the limit of %d", len(url), MaxURLBytes)
	return true
}

// argv checks an argv's size.
func (v *validator) argv(p fieldPath, argv []string) {
	size := 0
	for _, a := range argv {
		size += len(a) + 1
	}
	switch {
	case len(argv) > MaxArgs:
		v.addf(p, "%d arguments, over the limit of %d", len(argv), MaxArgs)
	case size > MaxArgBytes:
		v.addf(p, "the arguments are %d bytes, over the limit of %d", size, MaxArgBytes)
	}
}

// environment validates a command job's env and pass_env.
func (v *validator) environment(jp fieldPath, rj rawJob, j *Job) {
	if (rj.Env != nil || rj.PassEnv != nil) && rj.Command == nil {
		v.addf(jp, "env and pass_env apply to command jobs; an HTTP job's url, headers and body take ${NAME} references themselves")
		return
	}
	for _, name := range slices.Sorted(maps.Keys(rj.Env)) {
		value := rj.Env[name]
		p := jp.child("env").child(name)
		switch {
		case !envName.MatchString(name):
			v.addf(p, "%q is not an environment variable name (letters, digits and _, not starting with a digit)", name)
		case reservedEnv(name):
			v.addf(p, "%s: KIRA_* variables are Kira's own (the execution's facts, the member's settings)", name)
		}
		v.references(p, value)
	}
	for i, name := range rj.PassEnv {
		p := jp.child("pass_env").index(i)
		switch {
		case !envName.MatchString(name):
			v.addf(p, "%q is not an environment variable name", name)
		case reservedEnv(name):
			v.addf(p, "%s: KIRA_* variables are the member's own, its etcd credentials among them, and are never passed to a job", name)
		}
	}
	j.Env, j.PassEnv = rj.Env, rj.PassEnv
}

func (v *validator) duration(p fieldPath, s string) (time.Duration, bool) {
	d, err := time.ParseDuration(s)
	if err != nil {
		v.addf(p, "%q is not a duration: write it like 30s, 5m or 1h30m", s)
		return 0, false
	}
	return d, true
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// semantics validates the execution policy fields of a job.
func (v *validator) semantics(jp fieldPath, rj rawJob, j *Job) {
	switch m := Misfire(rj.Misfire); m {
	case "":
	case MisfireSkip, MisfireFireOnce, MisfireFireAll:
		j.Misfire = m
	default:
		v.addf(jp.child("misfire"), "misfire %q is not one of skip, fire-once, fire-all", rj.Misfire)
	}
	if rj.CatchupWindow != "" {
		if d, ok := v.duration(jp.child("catchup_window"), rj.CatchupWindow); ok {
			if d <= 0 {
				v.addf(jp.child("catchup_window"), "catchup_window must be positive, got %s", d)
			}
			j.CatchupWindow = d
		}
	}
	if rj.HistoryLimit != nil {
		if n := *rj.HistoryLimit; n < 1 || n > MaxHistoryLimit {
			v.addf(jp.child("history_limit"), "history_limit must be between 1 and %d, got %d", MaxHistoryLimit, n)
		} else {
			j.HistoryLimit = n
		}
	}
	switch o := Overlap(rj.Overlap); {
	case o == "":
	case o.Known():
		j.Overlap = o
	default:
		v.addf(jp.child("overlap"), "overlap %q is not one of skip, queue, replace, allow", rj.Overlap)
	}
	if rj.Retries != nil {
		rp := jp.child("retries")
		if rj.Retries.Max < 0 || rj.Retries.Max > 100 {
			v.addf(rp.child("max"), "retries.max must be between 0 and 100, got %d", rj.Retries.Max)
		}
		j.Retries.Max = rj.Retries.Max
		if rj.Retries.Backoff != "" {
			if d, ok := v.duration(rp.child("backoff"), rj.Retries.Backoff); ok {
				if d <= 0 {
					v.addf(rp.child("backoff"), "backoff must be positive, got %s", d)
				}
				j.Retries.Backoff = d
			}
		}
		if rj.Retries.MaxBackoff != "" {
			if d, ok := v.duration(rp.child("max_backoff"), rj.Retries.MaxBackoff); ok {
				j.Retries.MaxBackoff = d
			}
		}
		if j.Retries.MaxBackoff < j.Retries.Backoff {
			v.addf(rp.child("max_backoff"), "max_backoff %s is below backoff %s", j.Retries.MaxBackoff, j.Retries.Backoff)
		}
	}
	if rj.Jitter != "" {
		if d, ok := v.duration(jp.child("jitter"), rj.Jitter); ok {
			if d < 0 {
				v.addf(jp.child("jitter"), "jitter must not be negative, got %s", d)
			}
			j.Jitter = d
		}
	}
}
