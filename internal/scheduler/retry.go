package scheduler

import (
	"math/rand/v2"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/shard"
)

// backoff is the pause before attempt+1: exponential from the job's backoff,
// capped, with jitter in [d/2, d) so retries of many slots spread out.
func backoff(r config.Retries, attempt int) time.Duration {
	d := r.Backoff
	for i := 1; i < attempt && d < r.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, r.MaxBackoff)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}

// retryLater tries the fire again a backoff after the failed attempt ended,
// while the slot is held.
func (s *Scheduler) retryLater(sl *slot, f fire, ended time.Time) {
	next := f
	next.cause, next.attempt = history.CauseRetry, f.attempt+1
	s.redispatchAt(sl, retryFire{fire: next}, ended.Add(backoff(sl.job.spec.Retries, f.attempt)))
}

// startAgainLater puts a fire whose start etcd did not record (unreachable,
// electing a leader, refusing) back at the head of the slot's backlog at
// once, held there a moment before it is tried again: it never ran, so
// under fire-all it is not lost. Its id and attempt stay. It is a misfire
// now, so a fire that falls due while it waits joins the backlog behind it
// instead of being skipped as an overlap (dispatch). While it waits the
// slot is busy: no later fire is armed or has its start recorded ahead,
// which would put the slot's recorded start past a fire that never ran,
// and a new holder would take that later fire for the in-doubt one and
// never run this one. Held by TestRefusedStartIsNotOvertakenByTheNextFire
// and TestRandomWriterFaults -writer.fireall.
func (s *Scheduler) startAgainLater(sl *slot, f fire, ended time.Time) {
	f.misfire = true
	sl.owed.backlog = append([]fire{f}, sl.owed.backlog...)
	sl.owed.holdUntil = ended.Add(startAgainDelay)
	s.redispatchAt(sl, retryFire{wake: true}, sl.owed.holdUntil)
}

// startAgainDelay spaces the attempts to start a fire while etcd refuses.
const startAgainDelay = 500 * time.Millisecond

type retryFire struct {
	slot  shard.Slot
	token fencing.Token
	fire  fire
	// wake, instead of a fire, starts the slot's backlog once its hold
	// is over (startAgainLater).
	wake bool
}

// redispatchAt hands r back to the loop at when, while the slot is held.
func (s *Scheduler) redispatchAt(sl *slot, r retryFire, when time.Time) {
	next := r.fire
	timer := s.cfg.Clock.NewTimer(time.Hour)
	timer.ResetAt(when)
	lead, id, token := sl.leadCtx, sl.id, sl.token
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer timer.Stop()
		select {
		case <-timer.C():
		case <-lead.Done():
			return
		}
		select {
		case s.retries <- retryFire{slot: id, token: token, fire: next, wake: r.wake}:
		case <-lead.Done():
		case <-s.stopped:
		}
	}()
}

func (s *Scheduler) retryDue(r retryFire) {
	sl, ok := s.slots[r.slot]
	if !ok || !sl.held() || sl.token != r.token {
		return // retry only while the slot is still held
	}
	if r.wake {
		s.startWaiting(sl, s.cfg.Clock.Now())
		return
	}
	s.dispatch(sl, r.fire, s.cfg.Clock.Now())
}
