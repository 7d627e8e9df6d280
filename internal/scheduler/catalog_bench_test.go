package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/shard"
)

// BenchmarkCatalogChange is what a member's scheduler spends taking in a
// change to one job in a catalog of single-slot jobs (ns/op: one change):
// the job prepared (SetCatalogUpdate) and installed (catalogUpdated).
// "replaced", "added" and "removed" are the changes as config.WatchStored
// delivers a one-job edit, creation and deletion, naming the job: the job
// alone is prepared and installed, an added or removed one placed into the
// assignment alone. "whole" is a catalog given without saying what changed
// (SetCatalog): every job looked at, the view of three members applied to
// every slot. "reassign" is the whole assignment computed, coalesced,
// after jobs were added or removed (reassignIfDue), once per change here;
// ms-loop is the loop's part of it (its input taken, the result
// installed), the rest computed off the loop. The test plays the loop. It prints figures
// (docs/benchmarks.md#many-jobs-100000-single-slot-jobs):
//
//	go test ./internal/scheduler -run '^$' -bench CatalogChange -benchtime 10x
func BenchmarkCatalogChange(b *testing.B) {
	for _, how := range []string{"replaced", "added", "removed", "whole", "reassign"} {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprint(how, "/", n), func(b *testing.B) {
				specs := make([]config.Job, n)
				for i := range specs {
					specs[i] = config.Job{Name: fmt.Sprintf("customer-%06d", i), Schedule: "@daily", Handler: "noop"}
				}
				cat := catalog("change", specs...)
				s, _ := unrunScheduler(b, cat)
				view := member.View{Revision: 1, Members: []string{"m-a", "m-b", "m-c"}} // not this member: nothing campaigns
				s.applyView(view)
				if err := s.SetCatalog(cat, 1); err != nil { // the revision the first change follows
					b.Fatal(err)
				}
				s.catalogUpdated(view)
				b.ResetTimer()
				for i := range b.N {
					u := oneJobChange(how, cat, i)
					start := time.Now()
					if err := s.SetCatalogUpdate(u); err != nil {
						b.Fatal(err)
					}
					prepared := time.Since(start)
					s.catalogUpdated(view)
					if how == "reassign" {
						start = time.Now()
						s.reassignIfDue(s.reassign.due)
						asked := time.Since(start)
						w := kiratest.Receive(b, s.wholes, time.Minute, "the whole assignment")
						start = time.Now()
						s.reassigned(w)
						b.ReportMetric(float64((asked+time.Since(start)).Microseconds())/1000, "ms-loop")
					}
					if err := changed(s, how, u); err != nil {
						b.Fatalf("change %d: %v", i, err)
					}
					b.ReportMetric(float64(prepared.Microseconds())/1000, "ms-prepare")
				}
			})
		}
	}
}

// oneJobChange is the i-th change of the bench how to cat's jobs, at
// revision i+2.
func oneJobChange(how string, cat *config.Catalog, i int) config.Update {
	n := len(cat.Jobs)
	settings := *cat
	settings.Jobs = nil
	u := config.Update{Revision: int64(i + 2), Since: int64(i + 1), Settings: &settings}
	switch how {
	case "replaced":
		j := cat.Jobs[n/2]
		if i%2 == 0 {
			j.Schedule = "@hourly"
		}
		u.Replaced = []config.Job{j}
	case "added", "reassign":
		u.Added = []config.Job{{Name: fmt.Sprintf("added-%06d", i), Schedule: "@daily", Handler: "noop", Partitions: 1}}
	case "removed":
		u.Removed = []string{cat.Jobs[i].Name}
	case "whole":
		other := *cat
		other.Jobs = append([]config.Job(nil), cat.Jobs...)
		if i%2 == 0 {
			other.Jobs[n/2].Schedule = "@hourly"
		}
		u = config.Update{Catalog: &other, Revision: int64(i + 2)}
	}
	return u
}

// changed says what is wrong with the scheduler after the change u.
func changed(s *Scheduler, how string, u config.Update) error {
	if s.CatalogRevision() != u.Revision {
		return fmt.Errorf("the scheduler runs revision %d, want %d", s.CatalogRevision(), u.Revision)
	}
	var name, schedule string
	switch {
	case u.Catalog != nil:
		j := u.Catalog.Jobs[len(u.Catalog.Jobs)/2]
		name, schedule = j.Name, j.Schedule
	case len(u.Removed) > 0:
		if sl := s.slots[shard.Slot{Job: u.Removed[0]}]; sl != nil || s.jobs[u.Removed[0]] != nil {
			return fmt.Errorf("job %s still runs", u.Removed[0])
		}
		return nil
	case len(u.Added) > 0:
		name, schedule = u.Added[0].Name, u.Added[0].Schedule
	default:
		name, schedule = u.Replaced[0].Name, u.Replaced[0].Schedule
	}
	sl := s.slots[shard.Slot{Job: name}]
	if sl == nil || sl.job.spec.Schedule != schedule || s.assigned.out.Owner(sl.id) == "" {
		return fmt.Errorf("%s job %s not installed, or not placed", how, name)
	}
	return nil
}
