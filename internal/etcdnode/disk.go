package etcdnode

import (
	"context"
	"log/slog"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage"
)

// DefaultMinFreeDisk is the free space under which KeepSpace raises the
// NOSPACE alarm for the filesystem of etcd's data (and WAL) directory: room
// for a new WAL segment (64 MiB, allocated at once), the database's growth
// and the writes in flight.
const DefaultMinFreeDisk = 256 << 20

// DiskCheckInterval is how often KeepSpace looks at the free space: a
// filesystem filling at 100 MB/s crosses 64 MiB of the margin between two
// looks at most.
const DiskCheckInterval = 100 * time.Millisecond

// diskGuard raises etcd's NOSPACE alarm before the filesystem of its data
// is full, and disarms it once space is back. etcd itself exits when a
// write to its database fails for want of space ("failed to commit tx"),
// and nothing resumes until it is started again; under the alarm it
// refuses writes instead, the members say so (ERROR, /readyz 503,
// kira_etcd_alarm), nothing starts, and writes resume by themselves when
// the alarm is disarmed. Held by TestFullDiskRaisesNoSpaceAndResumes
// (cmd/kira).
type diskGuard struct {
	dirs    []string
	min     uint64
	raised  bool // by this guard, and not yet disarmed
	lastErr bool // the last look failed (said once)
}

func newDiskGuard(e *embed.Etcd, min int64) *diskGuard {
	cfg := e.Config()
	dirs := []string{cfg.Dir}
	if cfg.WalDir != "" {
		dirs = append(dirs, cfg.WalDir)
	}
	return &diskGuard{dirs: dirs, min: uint64(max(min, 0))}
}

// free is the least free space of the guard's filesystems, for an
// unprivileged writer (etcd need not run as root), and its directory.
func (g *diskGuard) free() (uint64, string, error) {
	least, at := ^uint64(0), ""
	for _, d := range g.dirs {
		var st syscall.Statfs_t
		if err := syscall.Statfs(d, &st); err != nil {
			return 0, d, err
		}
		if f := st.Bavail * uint64(st.Bsize); f < least {
			least, at = f, d
		}
	}
	return least, at, nil
}

// check is one look at the free space.
func (g *diskGuard) check(ctx context.Context, e *embed.Etcd, logger *slog.Logger) {
	if g.min == 0 {
		return
	}
	free, dir, err := g.free()
	if err != nil {
		if !g.lastErr {
			logger.Warn("etcd: cannot read the free space of the data directory's filesystem", "dir", dir, "err", err)
		}
		g.lastErr = true
		return
	}
	g.lastErr = false
	s := e.Server
	switch {
	case !g.raised && free < g.min:
		_, err := s.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: uint64(s.MemberID()), Alarm: pb.AlarmType_NOSPACE})
		if err != nil {
			logger.Error("etcd: the filesystem of the data directory is nearly full, and raising the NOSPACE alarm failed: etcd stops if a write finds no space", "dir", dir, "free_bytes", free, "min_free_bytes", g.min, "err", err)
			return
		}
		g.raised = true
		logger.Error("etcd: the filesystem of the data directory is nearly full: raised the NOSPACE alarm, so etcd refuses writes (nothing starts) rather than stop on a failed write; free space on that filesystem and writes resume by themselves",
			"dir", dir, "free_bytes", free, "min_free_bytes", g.min)
	case g.raised && free >= g.min+g.min/2:
		quota := s.Cfg.QuotaBackendBytes
		if quota <= 0 {
			quota = storage.DefaultQuotaBytes
		}
		if size := s.Backend().Size(); float64(size) >= RecoverBelow*float64(quota) {
			g.raised = false // the quota's alarm now: recoverSpace's to disarm
			logger.Warn("etcd: space on the filesystem is back, but the database is near its quota: the NOSPACE alarm stays raised until compaction frees space", "dir", dir, "free_bytes", free, "size_bytes", size, "quota_bytes", quota)
			return
		}
		_, err := s.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, MemberID: uint64(s.MemberID()), Alarm: pb.AlarmType_NOSPACE})
		if err != nil {
			logger.Error("etcd: disarming the NOSPACE alarm failed", "err", err)
			return
		}
		g.raised = false
		logger.Warn("etcd: space on the filesystem of the data directory is back: NOSPACE alarm disarmed; writes resume", "dir", dir, "free_bytes", free, "min_free_bytes", g.min)
	}
}
