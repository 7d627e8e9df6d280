package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"

	"github.com/kira-scheduler/kira/fencing"
)

// Environment variables and headers that carry an execution's facts. They are
// contracts with users' programs: do not rename them.
const (
	EnvJob           = "KIRA_JOB"
	EnvPartition     = "KIRA_PARTITION"
	EnvPartitions    = "KIRA_PARTITIONS"
	EnvExecutionID   = "KIRA_EXECUTION_ID"
	EnvScheduledTime = "KIRA_SCHEDULED_TIME"
	EnvMember        = "KIRA_MEMBER"

	HeaderJob            = "Kira-Job"
	HeaderPartition      = "Kira-Partition"
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderScheduledTime  = "Kira-Scheduled-Time"
	HeaderMember         = "Kira-Member"
)

// Execution is one run of one slot for one scheduled time.
type Execution struct {
	Job        string
	Partition  int // 0-based
	Partitions int
	Token      fencing.Token
	// ID is the idempotency key: the same for every attempt of the same fire.
	ID            string
	ScheduledTime time.Time
	Member        string
	// LeaderKey is the slot's election key this execution was started under.
	LeaderKey string
}

// ExecutionID derives the id of the fire of (job, partition) at scheduled.
// It depends on nothing else, so every member, and every retry, agrees on it.
func ExecutionID(job string, partition int, scheduled time.Time) string {
	h := sha256.New()
	h.Write([]byte(job))
	h.Write([]byte{0})
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(partition))
	binary.BigEndian.PutUint64(b[8:], uint64(scheduled.UnixNano()))
	h.Write(b[:])
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// ManualExecutionID identifies the manual run of (job, partition) requested
// by the control key created at revision rev (kira trigger): unique per
// request, and the same on every member and every retry.
func ManualExecutionID(job string, partition int, rev int64) string {
	return "manual-" + ExecutionID(job+"/manual", partition, time.Unix(0, rev))
}

// ScheduledTimeText is the scheduled time as users see it: RFC 3339, UTC, nanoseconds.
func (e Execution) ScheduledTimeText() string {
	return e.ScheduledTime.UTC().Format(time.RFC3339Nano)
}

// Env returns the KIRA_* variables of the execution.
func (e Execution) Env() []string {
	return []string{
		EnvJob + "=" + e.Job,
		EnvPartition + "=" + strconv.Itoa(e.Partition),
		EnvPartitions + "=" + strconv.Itoa(e.Partitions),
		fencing.EnvToken + "=" + e.Token.String(),
		EnvExecutionID + "=" + e.ID,
		EnvScheduledTime + "=" + e.ScheduledTimeText(),
		EnvMember + "=" + e.Member,
		fencing.EnvLeaderKey + "=" + e.LeaderKey,
	}
}

// SetHeaders writes the execution's facts into h.
func (e Execution) SetHeaders(h http.Header) {
	h.Set(HeaderJob, e.Job)
	h.Set(HeaderPartition, strconv.Itoa(e.Partition))
	h.Set(fencing.HeaderToken, e.Token.String())
	h.Set(HeaderIdempotencyKey, e.ID)
	h.Set(HeaderScheduledTime, e.ScheduledTimeText())
	h.Set(HeaderMember, e.Member)
}

type executionKey struct{}

// WithExecution returns a context carrying e and its token.
func WithExecution(ctx context.Context, e Execution) context.Context {
	return fencing.WithClaim(context.WithValue(ctx, executionKey{}, e), fencing.Claim{LeaderKey: e.LeaderKey, Token: e.Token})
}

type startedKey struct{}

// WithStarted returns a context whose Command calls started once its process
// has started (exec'd), or could not start, from Execute's own goroutine.
// The scheduler holds its bookkeeping back until then, so that it does not
// take the CPU the new process needs for its exec.
func WithStarted(ctx context.Context, started func()) context.Context {
	return context.WithValue(ctx, startedKey{}, started)
}

func notifyStarted(ctx context.Context) {
	if started, ok := ctx.Value(startedKey{}).(func()); ok {
		started()
	}
}

// FromContext returns the execution a handler runs for.
func FromContext(ctx context.Context) (Execution, bool) {
	e, ok := ctx.Value(executionKey{}).(Execution)
	return e, ok
}
