package incarnation

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// alarmPoll is how often a member asks etcd for its alarms.
const alarmPoll = 2 * time.Second

// alarms is what the member last learned of etcd's alarms.
type alarms struct {
	mu     sync.Mutex
	raised []string // "NOSPACE", "CORRUPT"; sorted
}

// watchAlarms asks etcd for its alarms every alarmPoll until ctx ends, and
// says loudly when one is raised and when it is gone: under NOSPACE etcd
// refuses every write, so no fire can record its start and none starts
// (nothing runs twice, nothing runs at all) until space is freed and the
// alarm disarmed; leases and elections already held keep working.
func (a *alarms) watch(ctx context.Context, cli *clientv3.Client, logger *slog.Logger) {
	tick := time.NewTicker(alarmPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		actx, cancel := context.WithTimeout(ctx, alarmPoll)
		resp, err := cli.AlarmList(actx)
		cancel()
		if err != nil {
			continue // an unreachable etcd is the lease's business
		}
		var now []string
		for _, m := range resp.Alarms {
			if name := m.Alarm.String(); !slices.Contains(now, name) {
				now = append(now, name)
			}
		}
		slices.Sort(now)
		a.set(now, logger)
	}
}

func (a *alarms) set(now []string, logger *slog.Logger) {
	a.mu.Lock()
	before := a.raised
	a.raised = now
	a.mu.Unlock()
	for _, name := range now {
		if !slices.Contains(before, name) {
			logger.Error("etcd raised the "+name+" alarm: it refuses every write, so no execution can start until it is disarmed",
				"alarm", name, "fix", "free space: etcd's database (compact, defragment) or the filesystem under etcd's data directory; then etcdctl alarm disarm. kira etcd and kira run's embedded etcd do it by themselves once compaction or the operator has freed space")
		}
	}
	for _, name := range before {
		if !slices.Contains(now, name) {
			logger.Warn("etcd's "+name+" alarm is disarmed: executions start again", "alarm", name)
		}
	}
}

// EtcdAlarms returns the alarms etcd had raised at the member's last look
// (such as "NOSPACE"); none when it is healthy.
func (inc *Incarnation) EtcdAlarms() []string {
	inc.alarms.mu.Lock()
	defer inc.alarms.mu.Unlock()
	return slices.Clone(inc.alarms.raised)
}
