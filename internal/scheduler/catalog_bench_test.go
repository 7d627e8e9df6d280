package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/shard"
)

// BenchmarkCatalogChange is what a member's scheduler spends taking in a
// change to one job's schedule in a catalog of single-slot jobs: the job
// prepared again (SetCatalogUpdate), the catalog installed and, when the
// change comes whole, the view of three members applied to every slot
// (catalogUpdated). "replaced" is the change as config.WatchStored
// delivers an edit of one job, naming it; "whole" is a catalog given
// without saying what changed (SetCatalog). The test plays the loop. It
// prints figures (docs/benchmarks.md#many-jobs-100000-single-slot-jobs):
//
//	go test ./internal/scheduler -run '^$' -bench CatalogChange -benchtime 10x
func BenchmarkCatalogChange(b *testing.B) {
	for _, how := range []string{"replaced", "whole"} {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprint(how, "/", n), func(b *testing.B) {
				specs := make([]config.Job, n)
				for i := range specs {
					specs[i] = config.Job{Name: fmt.Sprintf("customer-%06d", i), Schedule: "@daily", Handler: "noop"}
				}
				cat := catalog("change", specs...)
				other := *cat
				other.Jobs = append([]config.Job(nil), cat.Jobs...)
				other.Jobs[n/2].Schedule = "@hourly"
				s, _ := unrunScheduler(b, cat)
				view := member.View{Revision: 1, Members: []string{"m-a", "m-b", "m-c"}} // not this member: nothing campaigns
				s.applyView(view)
				if err := s.SetCatalog(cat, 1); err != nil { // the revision the first change replaces jobs of
					b.Fatal(err)
				}
				s.catalogUpdated(view)
				b.ResetTimer()
				for i := range b.N {
					u := config.Update{Catalog: cat, Revision: int64(i + 2)}
					if i%2 == 0 {
						u.Catalog = &other
					}
					if how == "replaced" {
						u.Since, u.Replaced = int64(i+1), []int{n / 2}
					}
					start := time.Now()
					if err := s.SetCatalogUpdate(u); err != nil {
						b.Fatal(err)
					}
					prepared := time.Since(start)
					s.catalogUpdated(view)
					if s.CatalogRevision() != u.Revision || s.slots[shard.Slot{Job: fmt.Sprintf("customer-%06d", n/2)}].job.spec.Schedule != u.Catalog.Jobs[n/2].Schedule {
						b.Fatalf("change %d not installed", i)
					}
					b.ReportMetric(float64(prepared.Microseconds())/1000, "ms-prepare")
				}
			})
		}
	}
}
