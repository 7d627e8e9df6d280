package charts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/bench"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestChartsDrawWhatWasMeasured: a report with lateness rows of two load
// shapes and the fork floor gets the lateness chart alone, with a line per
// shape and none for the floor (it ran no scheduler); a soak gets the soak
// chart with each member's memory.
func TestChartsDrawWhatWasMeasured(t *testing.T) {
	row := func(slots int, executor string, jitter time.Duration, started int) bench.Lateness {
		return bench.Lateness{Slots: slots, Executor: executor, Jitter: jitter,
			Figures: bench.Figures{Expected: 10 * slots, Started: started, P50: time.Millisecond, P99: 9 * time.Millisecond}}
	}
	r := &bench.Report{Lateness: []bench.Lateness{
		row(1000, "go-handler", time.Second, 10000), row(5000, "go-handler", time.Second, 50000),
		row(1000, "http", 0, 9000), {Slots: 1000, Executor: "sh", NoScheduler: true, Figures: bench.Figures{Expected: 10000, Started: 10000}},
	}}
	dir := t.TempDir()
	paths, err := Write(dir, r)
	if err != nil || len(paths) != 1 || filepath.Base(paths[0]) != LatenessFile {
		t.Fatalf("Write: %v, %v; want the lateness chart alone", paths, err)
	}
	svg := read(t, paths[0])
	for _, want := range []string{"p50, go-handler, spread over 1s", "p99, go-handler, spread over 1s", "p99, http, one instant", "http, one instant"} {
		if !strings.Contains(svg, want) {
			t.Errorf("lateness chart has no %q", want)
		}
	}
	if strings.Contains(svg, "sh, ") {
		t.Errorf("lateness chart draws the fork floor, which ran no scheduler")
	}
	r = &bench.Report{Soak: &bench.Soak{Slots: 1000, QuotaBytes: 2 << 30, Samples: []bench.SoakSample{
		{At: 0, DBBytes: 4e6, DBInUseBytes: 4e6, RSSBytes: []float64{63e6, 64e6, 65e6}},
		{At: 5 * time.Minute, DBBytes: 110e6, DBInUseBytes: 106e6, RSSBytes: []float64{66e6, 70e6, 73e6}},
	}}}
	paths, err = Write(dir, r)
	if err != nil || len(paths) != 1 || filepath.Base(paths[0]) != SoakFile {
		t.Fatalf("Write: %v, %v; want the soak chart alone", paths, err)
	}
	svg = read(t, paths[0])
	for _, want := range []string{"database file", "in use", "member 1", "member 3", "quota 2147 MB"} {
		if !strings.Contains(svg, want) {
			t.Errorf("soak chart has no %q", want)
		}
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
