package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/kira-scheduler/kira/internal/ops"
)

// The bounds of a timeline query: the window (since), the number of time
// buckets it is cut in, and the rows of one answer.
const (
	defaultWindow = 15 * time.Minute
	maxWindow     = 24 * time.Hour
	// defaultBuckets cuts the window when bucket is not given.
	defaultBuckets = 60
	maxBuckets     = 1440
	defaultRows    = 100
	maxRows        = 1000
)

// durationParam reads the query parameter name as a Go duration: def when
// absent, else within [lo, hi].
func durationParam(r *http.Request, name string, def, lo, hi time.Duration) (time.Duration, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < lo || d > hi {
		return 0, errorf(http.StatusBadRequest, "%s=%q: want a duration from %s to %s, such as 15m", name, v, lo, hi)
	}
	return d, nil
}

// timeline answers the executions scheduled in the last since, up to now.
func (s *server) timeline(ctx context.Context, r *http.Request) (any, error) {
	since, err := durationParam(r, "since", defaultWindow, time.Minute, maxWindow)
	if err != nil {
		return nil, err
	}
	bucket, err := durationParam(r, "bucket", max(time.Second, (since/defaultBuckets).Truncate(time.Second)), time.Second, since)
	if err != nil {
		return nil, err
	}
	if since/bucket > maxBuckets {
		return nil, errorf(http.StatusBadRequest, "since=%s in buckets of %s is over %d buckets: take a wider bucket", since, bucket, maxBuckets)
	}
	offset, err := intParam(r, "offset", 0, 1<<30)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", defaultRows, maxRows)
	if err != nil {
		return nil, err
	}
	if limit == 0 {
		return nil, errorf(http.StatusBadRequest, "limit=0: want at least one row")
	}
	to := time.Now().UTC()
	q := ops.TimelineQuery{From: to.Add(-since), To: to, Bucket: bucket, Job: r.URL.Query().Get("job"), Offset: offset, Limit: limit}
	tl, err := ops.ReadTimeline(ctx, s.cfg.KV, s.journals, s.rings, &s.catalogs, s.cfg.Cluster, q)
	if errors.Is(err, ops.ErrNoJob) {
		return nil, errorf(http.StatusNotFound, "cluster %q has no job %q", s.cfg.Cluster, q.Job)
	}
	return tl, err
}

func (s *server) health(ctx context.Context, _ *http.Request) (any, error) {
	st, err := ops.ReadStatusCached(ctx, s.cfg.KV, s.cfg.Cluster, &s.catalogs)
	if err != nil {
		return nil, err
	}
	problems := ops.Health(st)
	if s.cfg.Peers != nil {
		problems = append(problems, ops.TwoLeaders(ops.ReadClaims(ctx, s.cfg.Peers, st.Members))...)
	}
	if s.cfg.Maintenance != nil {
		resp, err := s.cfg.Maintenance.AlarmList(ctx)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, a := range resp.Alarms {
			if !slices.Contains(names, a.Alarm.String()) {
				names = append(names, a.Alarm.String())
			}
		}
		problems = append(ops.AlarmProblems(names), problems...)
	}
	return problems, nil
}
