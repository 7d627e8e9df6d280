package scheduler

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/notify"
	"github.com/kira-scheduler/kira/internal/shard"
)

// notifyGrace bounds how long a stopping scheduler waits for its
// notifications to be delivered; what is left is reported undelivered.
const notifyGrace = 5 * time.Second

// newNotifier is the scheduler's notifier: its results become events
// (Notified, or NotifyFailed with the error as Reason).
func (s *Scheduler) newNotifier() *notify.Notifier {
	nc := s.cfg.Notify
	if nc.Logger == nil {
		nc.Logger = s.cfg.Logger
	}
	nc.OnResult = func(r notify.Result) {
		e := Event{Kind: Notified, Slot: shard.Slot{Job: r.Job, Partition: r.Partition}, At: s.cfg.Clock.Now()}
		if r.Err != nil {
			e.Kind, e.Reason = NotifyFailed, r.Err.Error()
		}
		s.emit(e)
	}
	return notify.New(nc)
}

// notify hands a final record of the slot to the notifier, for the job's
// rules. Final: no retry of it follows (finish.go decides), so the retries
// of an execution notify once, for the outcome of the last attempt.
func (s *Scheduler) notify(sl *slot, r history.Record) {
	if len(sl.job.spec.Notify) == 0 {
		return
	}
	r.Job, r.Partition, r.Member, r.Token = sl.id.Job, sl.id.Partition, s.member.ID(), sl.token
	m := notify.Message{Record: r, Cluster: s.member.Cluster()}
	if s.cfg.APIURL != "" {
		m.Link = fmt.Sprintf("%s/v1/jobs/%s/executions/%s", s.cfg.APIURL, url.PathEscape(r.Job), url.PathEscape(r.ExecutionID))
	}
	s.notifier.Notify(sl.job.spec.Notify, m)
}

// stopNotifier lets the queued notifications go out, within notifyGrace,
// then stops the notifier.
func (s *Scheduler) stopNotifier(stop context.CancelFunc, done <-chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), notifyGrace)
	s.notifier.Flush(ctx)
	cancel()
	stop()
	<-done
}
