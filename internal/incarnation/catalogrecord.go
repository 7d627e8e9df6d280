package incarnation

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// RecordPace bounds how often a member rewrites its record to publish the
// catalog revision it runs: at most once per RecordPace, so single-job
// changes stored 1,000 times a second cost etcd at most 5 record writes a
// second per member, and the other members no view rebuilt per change.
// The first revision after a quiet RecordPace is published at once; the
// latest is always published within RecordPace of its apply (or, after an
// etcd error, of the next attempt). What reads the record (kira status,
// the health check, a watch on the members' records waiting for a
// revision) sees every member reach the stored revision, some revisions
// in between skipped. Held by TestCatalogRevisionsPublishedCoalesced.
const RecordPace = 200 * time.Millisecond

// catalogRecord is the newest catalog revision the member runs, for its
// publisher (publishRevisions).
type catalogRecord struct {
	mu      sync.Mutex
	latest  int64
	applied int // revisions applied since the last published
	bell    chan struct{}
}

func newCatalogRecord() *catalogRecord { return &catalogRecord{bell: make(chan struct{}, 1)} }

// set says the member runs revision rev.
func (r *catalogRecord) set(rev int64) {
	r.mu.Lock()
	r.latest = max(r.latest, rev)
	r.applied++
	r.mu.Unlock()
	select {
	case r.bell <- struct{}{}:
	default:
	}
}

func (r *catalogRecord) take() (rev int64, applied int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rev, applied, r.applied = r.latest, r.applied, 0
	return rev, applied
}

// publishRevisions publishes, in the member's record, each revision set
// after published, paced by RecordPace, until ctx ends.
func (inc *Incarnation) publishRevisions(ctx context.Context, published int64, logger *slog.Logger) {
	r := inc.record
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.bell:
		}
		rev, applied := r.take()
		if rev > published {
			logger.Info("converging to a new catalog", "revision", rev, "revisions_applied", applied)
			if err := inc.member.SetCatalogRevision(ctx, rev); err != nil {
				if ctx.Err() == nil {
					logger.Warn("could not publish the catalog revision; trying again", "revision", rev, "err", err)
				}
				r.set(rev) // maybe applied: written again after the pause
			} else {
				published = rev
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(RecordPace):
		}
	}
}
