package bench

import (
	"fmt"
	"syscall"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/shard"
)

// movedShare is the share of n slots whose leader differs from before to after.
func movedShare(before, after map[shard.Slot]string, n int) float64 {
	moved := 0
	for s, o := range after {
		if before[s] != o {
			moved++
		}
	}
	return float64(moved) / float64(n)
}

// misplaced counts the slots of l held by a member the assignment does not prefer.
func misplaced(a *shard.Assignment, l map[shard.Slot]string) int {
	n := 0
	for s, owner := range l {
		if a.Owner(s) != owner {
			n++
		}
	}
	return n
}

// smallJobs is n slots as jobs like j of 1 to 16 partitions each.
func smallJobs(j config.Job, n int) []config.Job {
	var out []config.Job
	for i := 0; n > 0; i++ {
		s := j
		s.Name, s.Partitions = fmt.Sprintf("small-%04d", i), min(n, 1+i*7%16)
		out = append(out, s)
		n -= s.Partitions
	}
	return out
}

// cpuTime is this process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
