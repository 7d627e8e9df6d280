package bench

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/shard"
)

// A created job whose first record (sequence 0) is no longer among its
// records, in its ring or in a journal, had it overwritten by a newer one:
// its first fire cannot be read, and the bench says so rather than take
// its oldest record left for its first.
func TestFirstRecordOverwrittenIsCounted(t *testing.T) {
	rec := func(job string, seq int64) history.Slotted {
		return history.Slotted{Slot: shard.Slot{Job: job}, Stored: history.Stored{Seq: &seq}}
	}
	got := overwritten([]history.Slotted{rec("kept", 2), rec("kept", 0), rec("lost", 3), rec("lost", 1), rec("newer only", 5)})
	got2 := overwritten([]history.Slotted{{Slot: shard.Slot{Job: "old format"}}})
	if !got["lost"] || got["kept"] || !got["newer only"] || len(got) != 2 || len(got2) != 0 {
		t.Fatalf("overwritten = %v and %v; want only lost and newer only, and none for records without a sequence", got, got2)
	}
}

// Eight writers spread over three APIs keep one connection each to each
// API between writes: a write that opens a connection costs the member a
// new one, and the figures a handshake.
func TestJobWritesKeepTheirConnections(t *testing.T) {
	var opened atomic.Int64
	var apis []string
	for range 3 {
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(time.Millisecond) // the writers overlap, as against a member
			w.WriteHeader(http.StatusCreated)
		}))
		s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				opened.Add(1)
			}
		}
		s.Start()
		defer s.Close()
		apis = append(apis, s.URL)
	}
	var fig WriteFigures
	runWrites(context.Background(), apis, 8, 600, "PUT", 10*time.Second, &fig)
	if fig.Done != 600 || opened.Load() > 8*3 {
		t.Fatalf("%d writes done (%d failed: %s) over %d connections; want 600 over at most 24, one a writer and API", fig.Done, fig.Failed, fig.FirstErr, opened.Load())
	}
}
