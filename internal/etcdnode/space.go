package etcdnode

import (
	"context"
	"log/slog"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
)

// RecoverBelow is the share of the quota the data in use must be under
// before KeepSpace defragments and disarms: well under the quota, so the
// writes that resume do not raise the alarm again at once.
const RecoverBelow = 0.8

// SpaceCheckInterval is how often KeepSpace looks at the alarm.
const SpaceCheckInterval = 2 * time.Second

// KeepSpace recovers this etcd member from a NOSPACE alarm by itself, which
// etcd leaves to an operator. While the alarm is raised, each time a
// compaction has finished deleting what it freed it defragments the
// member's backend (returning those pages: the quota counts the file) and,
// if the database is then under RecoverBelow of the quota, disarms the
// member's alarm. Writes, and so scheduling, resume. (The in-use size etcd
// reports is no guide here: it is updated when writes commit, and there are
// none.) It returns when ctx ends. kira etcd and kira run's embedded etcd
// run it; held by TestKeepSpaceWaitsForTheCompactionToFinish and
// TestNoSpaceRecoversByItself (cmd/kira).
//
// It also raises the alarm itself while the filesystem of etcd's data has
// less than minFreeDisk bytes free (0: never), and disarms it once space is
// back (diskGuard).
func KeepSpace(ctx context.Context, e *embed.Etcd, minFreeDisk int64, logger *slog.Logger) {
	tick := time.NewTicker(SpaceCheckInterval)
	defer tick.Stop()
	disk := time.NewTicker(DiskCheckInterval)
	defer disk.Stop()
	guard := newDiskGuard(e, minFreeDisk)
	var defraggedAt int64 // the compacted revision at the last defragment
	for {
		select {
		case <-ctx.Done():
			return
		case <-disk.C:
			guard.check(ctx, e, logger)
		case <-tick.C:
			if !guard.raised { // a defragment needs space: none while the disk is full
				defraggedAt = recoverSpace(ctx, e, logger, defraggedAt)
			}
		}
	}
}

// recoverSpace is one look at the alarm; it returns the compacted revision
// at its defragment, if it made one (defraggedAt otherwise).
func recoverSpace(ctx context.Context, e *embed.Etcd, logger *slog.Logger, defraggedAt int64) int64 {
	s := e.Server
	raised := false
	for _, a := range s.Alarms() {
		raised = raised || (a.Alarm == pb.AlarmType_NOSPACE && a.MemberID == uint64(s.MemberID()))
	}
	compacted := finishedCompaction(s.Backend())
	if !raised || compacted == defraggedAt {
		return defraggedAt // healthy, or nothing freed since the last defragment
	}
	quota := s.Cfg.QuotaBackendBytes
	if quota <= 0 {
		quota = storage.DefaultQuotaBytes
	}
	be := s.Backend()
	logger.Warn("etcd: NOSPACE alarm raised: defragmenting to return the space compaction freed", "compacted_revision", compacted, "size_bytes", be.Size(), "quota_bytes", quota)
	if err := be.Defrag(); err != nil {
		logger.Error("etcd: defragment failed; the NOSPACE alarm stays raised", "err", err)
		return defraggedAt
	}
	if float64(be.Size()) >= RecoverBelow*float64(quota) {
		logger.Error("etcd: still full after defragmenting: the NOSPACE alarm stays raised until compaction frees more (or raise --quota-backend-bytes)", "size_bytes", be.Size(), "quota_bytes", quota)
		return compacted
	}
	_, err := s.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, MemberID: uint64(s.MemberID()), Alarm: pb.AlarmType_NOSPACE})
	if err != nil {
		logger.Error("etcd: disarming the NOSPACE alarm failed", "err", err)
		return compacted
	}
	logger.Warn("etcd: NOSPACE alarm disarmed; writes resume", "size_bytes", be.Size(), "quota_bytes", quota)
	return compacted
}

// finishedCompaction is the revision of the newest compaction that has
// deleted from the backend what it freed. etcd moves its compacted revision
// on when a compaction is asked for and deletes in the background: a
// defragment before that ends returns nothing, and no later compaction may
// come while every write is refused.
func finishedCompaction(be backend.Backend) int64 {
	tx := be.ReadTx()
	tx.RLock()
	defer tx.RUnlock()
	rev, _ := mvcc.UnsafeReadFinishedCompact(tx)
	return rev
}
