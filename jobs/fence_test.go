package jobs

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
)

var claim = fencing.Claim{LeaderKey: "/kira/c/election/sync/2/694d", Token: 88}

func TestFenceURL(t *testing.T) {
	status := http.StatusNoContent
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(status)
	}))
	defer srv.Close()
	f := FenceForJob(config.Job{FenceURL: srv.URL})
	if err := f.Raise(context.Background(), "sync", 2, claim); err != nil {
		t.Fatal(err)
	}
	if got.Get("Kira-Fencing-Token") != "88" || got.Get("Kira-Job") != "sync" || got.Get("Kira-Partition") != "2" {
		t.Fatalf("headers %v", got)
	}
	status = http.StatusConflict
	if err := f.Raise(context.Background(), "sync", 2, claim); !errors.Is(err, fencing.ErrFenced) {
		t.Fatalf("409: %v; want ErrFenced", err)
	}
	status = http.StatusInternalServerError
	if err := f.Raise(context.Background(), "sync", 2, claim); err == nil || errors.Is(err, fencing.ErrFenced) {
		t.Fatalf("500: %v; want a plain error", err)
	}
}

func TestFenceCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	f := FenceForJob(config.Job{FenceCommand: []string{"sh", "-c", "env | grep ^KIRA_ > " + out}})
	if err := f.Raise(context.Background(), "sync", 2, claim); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(out)
	for _, want := range []string{"KIRA_FENCING_TOKEN=88", "KIRA_JOB=sync", "KIRA_PARTITION=2", "KIRA_LEADER_KEY=" + claim.LeaderKey} {
		if !strings.Contains(string(data), want) {
			t.Errorf("fence command env lacks %s:\n%s", want, data)
		}
	}
	failing := FenceForJob(config.Job{FenceCommand: []string{"sh", "-c", "echo db down >&2; exit 4"}})
	if err := failing.Raise(context.Background(), "sync", 2, claim); err == nil || !strings.Contains(err.Error(), "db down") {
		t.Fatalf("failing fence command: %v", err)
	}
	if FenceForJob(config.Job{}) != nil {
		t.Fatal("a job without fence_url or fence_command has a fence")
	}
}
