package main

import (
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/kira-scheduler/kira/internal/highwater"
	"github.com/kira-scheduler/kira/internal/incarnation"
	"github.com/kira-scheduler/kira/internal/scheduler"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// jobLabel is the label that names the catalog job on every per-job series.
// Not "job": a Prometheus server sets job (the scrape job) and instance on
// every series it scrapes, and would rename a target's own job to
// exported_job. TestAlertsInARealPrometheus checks no label is renamed.
const jobLabel = "kira_job"

// maxSlotSeries bounds the per-partition series of one job: a job with
// more partitions is reported by kira_slots_led{kira_job} alone, so a job of
// 100,000 partitions costs a member one series, not a third of 100,000.
const maxSlotSeries = 1000

// metrics are the member's Prometheus series, fed by its scheduler's
// events. Names follow client_golang's conventions; docs/operations.md
// lists them with alert rules.
type metrics struct {
	registry    *prometheus.Registry
	leader      *prometheus.GaugeVec
	led         *prometheus.GaugeVec
	executions  *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	lastSuccess *prometheus.GaugeVec
	skipped     *prometheus.CounterVec
	missed      *prometheus.CounterVec
	fenced      *prometheus.CounterVec
	notified    *prometheus.CounterVec
	lateness    *prometheus.HistogramVec
}

func newMetrics(current func() *incarnation.Incarnation) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kira_slot_leader",
			Help: "1 while this member leads the slot; the series is deleted when it stops. Summed over members: 0 for long means nobody does the work, 2 means split brain. Only for jobs of at most " + strconv.Itoa(maxSlotSeries) + " partitions.",
		}, []string{jobLabel, "partition"}),
		led: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kira_slots_led", Help: "Slots of the job this member leads.",
		}, []string{jobLabel}),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kira_executions_total", Help: "Executions that ended, by outcome.",
		}, []string{jobLabel, "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kira_execution_duration_seconds", Help: "How long executions ran, from their start to their end, by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 12),
		}, []string{jobLabel, "outcome"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kira_job_last_success_timestamp_seconds", Help: "When an execution of the job last succeeded on this member (Unix seconds).",
		}, []string{jobLabel}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kira_fires_skipped_total", Help: "Fires not started, by reason.",
		}, []string{jobLabel, "reason"}),
		missed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kira_fires_missed_total", Help: "Fires missed while nobody held their slot and not run, by the job's misfire policy.",
		}, []string{jobLabel, "policy"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kira_fenced_total", Help: "Executions a protected resource refused for a newer token.",
		}, []string{jobLabel}),
		notified: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kira_notifications_total", Help: "Notifications of executions (notify: rules), by result: delivered, or failed (retries and deadline exhausted, refused, or dropped: each is logged).",
		}, []string{jobLabel, "result"}),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kira_execution_lateness_seconds", Help: "Start time minus scheduled time.",
			Buckets: []float64{.001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 5},
		}, []string{jobLabel}),
	}
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kira_build_info", Help: "1, labelled with the build's version."}, []string{"version", "goversion"})
	buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
	leaseLeft := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kira_lease_trust_seconds", Help: "How long this member can still prove its lease alive without another renewal (0 when it cannot: it starts nothing).",
	}, func() float64 {
		if inc := current(); inc != nil {
			return max(inc.Member().TrustLeft(), 0).Seconds()
		}
		return 0
	})
	// The TTL beside the trust left lets one alert rule serve every
	// lease_ttl: trust left / TTL is between 5/6 and about 1/2 while
	// renewals come every TTL/3 (deploy/prometheus/alerts.yaml).
	leaseTTL := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kira_lease_ttl_seconds", Help: "The TTL of this member's lease (the catalog's membership.lease_ttl); 0 while it has none.",
	}, func() float64 {
		if inc := current(); inc != nil {
			return inc.Member().TTL().Seconds()
		}
		return 0
	})
	catalogRev := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kira_catalog_revision", Help: "The etcd revision of the catalog this member runs (compare with the stored one: kira status).",
	}, func() float64 {
		if inc := current(); inc != nil {
			return float64(inc.Scheduler().CatalogRevision())
		}
		return 0
	})
	m.registry.MustRegister(incarnationGauges{current: current}, m.leader, m.led, m.executions, m.duration, m.lastSuccess, m.skipped, m.missed, m.fenced, m.notified, m.lateness,
		catalogRev, buildInfo, leaseLeft, leaseTTL, collectors.NewGoCollector(liveHeap), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// incarnationGauges are computed at each scrape from the current
// incarnation: kira_etcd_alarm, kira_state_writes_queued,
// kira_state_write_wait_seconds and kira_slots_taking_over; and from the
// catalog it runs:
// kira_job_partitions (what sum by (kira_job) (kira_slots_led) must equal: less
// means a slot without a leader, more means two), kira_job_eligible_members
// (0: the job's placement matches no member) and
// kira_job_next_fire_timestamp_seconds, with the scheduler's own schedule
// code (the slots' jitter comes on top), as kube-state-metrics reports a
// CronJob's next schedule time, and kira_job_period_seconds, the time
// between that fire and the one after it (what "no success for two
// periods" is measured in).
type incarnationGauges struct {
	current func() *incarnation.Incarnation
}

var (
	nextFireDesc = prometheus.NewDesc("kira_job_next_fire_timestamp_seconds",
		"The job's next scheduled time (Unix seconds), before each slot's jitter.", []string{jobLabel}, nil)
	periodDesc = prometheus.NewDesc("kira_job_period_seconds",
		"Time between the job's next two scheduled times: its interval for @every, the coming gap for a cron schedule.", []string{jobLabel}, nil)
	partitionsDesc = prometheus.NewDesc("kira_job_partitions",
		"The job's partitions (slots) in the catalog this member runs.", []string{jobLabel}, nil)
	alarmDesc = prometheus.NewDesc("kira_etcd_alarm",
		"1 while etcd has the alarm raised (NOSPACE: every write refused, no execution starts), as this member last saw; NOSPACE is always reported.", []string{"alarm"}, nil)
	eligibleDesc = prometheus.NewDesc("kira_job_eligible_members",
		"Members of the latest view the job's placement admits (all members for a job without one); 0: nobody runs the job.", []string{jobLabel}, nil)
	writesQueuedDesc = prometheus.NewDesc("kira_state_writes_queued",
		"Fenced writes (starts, results, resigns) waiting in this member's writer for etcd.", nil, nil)
	takingOverDesc = prometheus.NewDesc("kira_slots_taking_over",
		"Slots this member leads whose takeover has not finished (their fence being raised): they do not fire yet.", nil, nil)
	writeWaitDesc = prometheus.NewDesc("kira_state_write_wait_seconds",
		"How long the oldest queued fenced write has waited (0 when none waits); above 0.25 for long, etcd commits the member's writes slower than they come: past capacity.", nil, nil)
)

func (n incarnationGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- nextFireDesc
	ch <- periodDesc
	ch <- partitionsDesc
	ch <- eligibleDesc
	ch <- alarmDesc
	ch <- writesQueuedDesc
	ch <- writeWaitDesc
	ch <- takingOverDesc
}

func (n incarnationGauges) Collect(ch chan<- prometheus.Metric) {
	inc := n.current()
	if inc == nil {
		return
	}
	alarms := inc.EtcdAlarms()
	if !slices.Contains(alarms, "NOSPACE") {
		ch <- prometheus.MustNewConstMetric(alarmDesc, prometheus.GaugeValue, 0, "NOSPACE")
	}
	for _, a := range alarms {
		ch <- prometheus.MustNewConstMetric(alarmDesc, prometheus.GaugeValue, 1, a)
	}
	queued, oldest := inc.Scheduler().StateWrites()
	ch <- prometheus.MustNewConstMetric(writesQueuedDesc, prometheus.GaugeValue, float64(queued))
	ch <- prometheus.MustNewConstMetric(writeWaitDesc, prometheus.GaugeValue, oldest.Seconds())
	ch <- prometheus.MustNewConstMetric(takingOverDesc, prometheus.GaugeValue, float64(inc.Scheduler().TakingOver()))
	now := time.Now().UTC()
	for job, n := range inc.Scheduler().Eligible() {
		ch <- prometheus.MustNewConstMetric(eligibleDesc, prometheus.GaugeValue, float64(n), job)
	}
	for _, j := range inc.Scheduler().Jobs() {
		ch <- prometheus.MustNewConstMetric(partitionsDesc, prometheus.GaugeValue, float64(j.Partitions), j.Name)
		sched, err := j.ParsedSchedule()
		if err != nil {
			continue
		}
		next := sched.Next(now)
		if next.IsZero() {
			continue
		}
		ch <- prometheus.MustNewConstMetric(nextFireDesc, prometheus.GaugeValue, float64(next.UnixNano())/float64(time.Second), j.Name)
		if after := sched.Next(next); !after.IsZero() {
			ch <- prometheus.MustNewConstMetric(periodDesc, prometheus.GaugeValue, after.Sub(next).Seconds(), j.Name)
		}
	}
}

// watchHighWater adds the series of the member's high-water mark: the
// highest etcd revision it has seen, how often etcd's revision went back
// below it, and whether it holds new work for that. Held by
// TestRestoreWithoutBumpIsDetected.
func (m *metrics) watchHighWater(mark *highwater.Mark) {
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kira_etcd_revision_high_water", Help: "The highest etcd revision this member has seen in etcd's linearizable answers (its high-water mark).",
		}, func() float64 { mark, _ := mark.State(); return float64(mark) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "kira_etcd_revision_rollbacks_total", Help: "Times this member saw etcd's revision go back below its high-water mark (etcd restored without raising its revision, or replaced): fencing tokens may be handed out twice.",
		}, func() float64 { _, falls := mark.State(); return float64(falls) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kira_etcd_revision_rollback_holding", Help: "1 while this member starts nothing because etcd's revision went back and has not passed its high-water mark again.",
		}, func() float64 {
			if mark.Holding() != "" {
				return 1
			}
			return 0
		}),
	)
}

func (m *metrics) observe(e scheduler.Event) {
	switch e.Kind {
	case scheduler.Acquired:
		m.led.WithLabelValues(e.Slot.Job).Inc()
		if e.Execution.Partitions <= maxSlotSeries {
			m.leader.WithLabelValues(e.Slot.Job, strconv.Itoa(e.Slot.Partition)).Set(1)
		}
	case scheduler.Released, scheduler.Lost:
		m.led.WithLabelValues(e.Slot.Job).Dec()
		m.leader.DeleteLabelValues(e.Slot.Job, strconv.Itoa(e.Slot.Partition))
	case scheduler.Started:
		m.lateness.WithLabelValues(e.Slot.Job).Observe(e.At.Sub(e.Execution.ScheduledTime).Seconds())
	case scheduler.Finished:
		m.finished(e)
	case scheduler.Notified:
		m.notified.WithLabelValues(e.Slot.Job, "delivered").Inc()
	case scheduler.NotifyFailed:
		m.notified.WithLabelValues(e.Slot.Job, "failed").Inc()
	case scheduler.Skipped:
		m.skipped.WithLabelValues(e.Slot.Job, e.Reason).Add(float64(max(e.Count, 1)))
		if e.Policy != "" {
			m.missed.WithLabelValues(e.Slot.Job, e.Policy).Add(float64(max(e.Count, 1)))
		}
	case scheduler.Forgotten:
		m.forget(e.Slot.Job)
	}
}

// forget deletes every series of job, deleted from the catalog: a churn of
// jobs created and deleted keeps the member's series as many as its jobs.
// Held by TestADeletedJobsSeriesAreDeleted.
func (m *metrics) forget(job string) {
	only := prometheus.Labels{jobLabel: job}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.leader, m.led, m.executions, m.duration, m.lastSuccess, m.skipped, m.missed, m.fenced, m.notified, m.lateness,
	} {
		v.DeletePartialMatch(only)
	}
}

func (m *metrics) finished(e scheduler.Event) {
	outcome := string(e.Result.Outcome)
	m.executions.WithLabelValues(e.Slot.Job, outcome).Inc()
	if !e.StartedAt.IsZero() {
		m.duration.WithLabelValues(e.Slot.Job, outcome).Observe(e.At.Sub(e.StartedAt).Seconds())
	}
	switch e.Result.Outcome {
	case jobs.Succeeded:
		m.lastSuccess.WithLabelValues(e.Slot.Job).Set(float64(e.At.UnixNano()) / float64(time.Second))
	case jobs.Fenced:
		m.fenced.WithLabelValues(e.Slot.Job).Inc()
	}
}

// liveHeap adds Go's live heap as of the last collection
// (go_gc_heap_live_bytes) to the Go collector's series: what a member's
// slots keep, without the garbage between collections. kira bench reads it
// (docs/benchmarks.md#rebalance).
var liveHeap = collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})
