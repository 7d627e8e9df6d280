package scheduler

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
)

// A fire armed ahead whose member cannot prove its lease at the instant
// (a stalled process: its keepalive answered late) does not start; under
// fire-all it is started again once the lease is proven, by the same
// holder, so it is not lost (a chaos run on a loaded machine lost one:
// TestGracefulStopDuringARunUnderLoad). The member's clock jumps past its
// trust deadline for one reading, the armed run's.
func TestAFireNotStartedForAnUnprovenLeaseStartsAgain(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	clk := clock.NewManual(t0)
	var stall atomic.Bool
	memberNow := func() time.Time {
		// Only the armed run's own check sees the stall: the loop's, which
		// would end the slot on it, came after the keepalive's answer.
		if stall.Load() && calledFrom("(*run).startRecorded") && stall.CompareAndSwap(true, false) {
			return clk.Now().Add(time.Hour) // past any trust deadline of a 600 s lease
		}
		return clk.Now()
	}
	job := withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "count", Misfire: config.MisfireFireAll, CatchupWindow: time.Minute})
	rec := newRecorder()
	armed := make(chan shard.Slot, 10)
	h := jobs.Handlers{"count": func(context.Context) error { return nil }}
	startNode(t, cli, catalog("untrusted", job), rec, h, nodeOpts{clock: clk, memberNow: memberNow, ttl: 600 * time.Second,
		grace: 10 * time.Minute, armed: func(s shard.Slot) { armed <- s }})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	advance(t, rec, clk, sec(10).Sub(t0))
	waitKind(t, rec, "12:00:10 recorded", 1, func(e Event) bool { return e.Kind == Finished })

	clk.Advance(sec(20).Sub(clk.Now()) - DefaultArmAhead/2)
	kiratest.Receive(t, armed, 10*time.Second, "12:00:20 armed")
	stall.Store(true)
	clk.Advance(DefaultArmAhead / 2)
	waitKind(t, rec, "12:00:20 not started: the lease unproven", 1, func(e Event) bool {
		return e.Kind == Finished && e.Execution.ScheduledTime.Equal(sec(20)) && errors.Is(e.Result.Err, ErrUntrusted)
	})
	clk.Advance(time.Second) // past the wait before a fire is started again
	waitKind(t, rec, "12:00:20 started again and ended", 1, func(e Event) bool {
		return e.Kind == Finished && e.Execution.ScheduledTime.Equal(sec(20)) && e.Result.Outcome == jobs.Succeeded
	})
}

// calledFrom reports whether a function whose name ends with name is on
// the caller's stack.
func calledFrom(name string) bool {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, name) {
			return true
		}
		if !more {
			return false
		}
	}
}
