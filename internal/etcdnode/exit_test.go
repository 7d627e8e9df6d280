package etcdnode

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// kira run's embedded etcd discards etcd's log (Quiet), but not the entry
// at which etcd stops the process, nor the line saying why: the full disk
// and its fix. (DPanic stands for Fatal here, which would end the test.)
func TestQuietEtcdStillSaysWhyItStops(t *testing.T) {
	var out strings.Builder
	lg, err := etcdLogger(Config{Name: "kira", Quiet: true}, &out)
	if err != nil {
		t.Fatal(err)
	}
	lg.Info("serving")
	lg.Warn("slow fdatasync")
	lg.DPanic("failed to commit tx", zap.Error(errors.New("write /data/member/snap/db: no space left on device")))
	got := out.String()
	if strings.Contains(got, "serving") || strings.Contains(got, "fdatasync") {
		t.Fatalf("a quiet etcd logged more than its stop:\n%s", got)
	}
	for _, want := range []string{`"msg":"failed to commit tx"`, "etcd member kira stops: the filesystem of its data directory is full (failed to commit tx: write /data/member/snap/db: no space left on device); free space on it, then start it again"} {
		if !strings.Contains(got, want) {
			t.Fatalf("missing %q in:\n%s", want, got)
		}
	}
}
