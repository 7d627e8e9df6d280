package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/membership"
)

// BenchmarkCatalogChange is what a member's scheduler spends taking in a
// change to one job's schedule in a catalog of single-slot jobs: the job
// prepared again (SetCatalog), the catalog installed and the view of three
// members applied to every slot (catalogUpdated). The test plays the loop.
// It prints figures
// (docs/benchmarks.md#many-jobs-100000-single-slot-jobs):
//
//	go test ./scheduler -run '^$' -bench CatalogChange -benchtime 5x
func BenchmarkCatalogChange(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			specs := make([]config.Job, n)
			for i := range specs {
				specs[i] = config.Job{Name: fmt.Sprintf("customer-%06d", i), Schedule: "@daily", Handler: "noop"}
			}
			cat := catalog("change", specs...)
			other := *cat
			other.Jobs = append([]config.Job(nil), cat.Jobs...)
			other.Jobs[n/2].Schedule = "@hourly"
			s, _ := unrunScheduler(b, cat)
			view := membership.View{Revision: 1, Members: []string{"m-a", "m-b", "m-c"}} // not this member: nothing campaigns
			s.applyView(view)
			b.ResetTimer()
			for i := range b.N {
				next := cat
				if i%2 == 0 {
					next = &other
				}
				start := time.Now()
				if err := s.SetCatalog(next, int64(i+2)); err != nil {
					b.Fatal(err)
				}
				prepared := time.Since(start)
				s.catalogUpdated(view)
				b.ReportMetric(float64(prepared.Microseconds())/1000, "ms-prepare")
			}
		})
	}
}
