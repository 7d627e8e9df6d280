package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/kiratest"
)

// sizedFS mounts a tmpfs of size MiB on a new directory, unmounted at the
// end of the test (after the processes started later have stopped). It
// needs root; the test is skipped otherwise (CI runs as root).
func sizedFS(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a full disk is tested on a size-limited tmpfs, which only root can mount: run the test as root (CI does)")
	}
	dir := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%dm", size)); errors.Is(err, syscall.EPERM) {
		// Root in a container without the right to mount: the machine, not Kira.
		t.Skipf("mount -t tmpfs -o size=%dm: %v: this machine lets no process mount a filesystem", size, err)
	} else if err != nil {
		t.Fatalf("mount -t tmpfs -o size=%dm: %v", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("umount %s: %v", dir, err)
		}
	})
	return dir
}

// fillUp writes 4 MiB files into dir, 80 MB a second as a runaway log
// would, until the filesystem refuses one; it returns them.
func fillUp(t *testing.T, dir string) []string {
	t.Helper()
	chunk := make([]byte, 4<<20)
	var files []string
	for i := 0; ; i++ {
		f := filepath.Join(dir, fmt.Sprintf("junk%04d", i))
		files = append(files, f)
		err := os.WriteFile(f, chunk, 0o600)
		if errors.Is(err, syscall.ENOSPC) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if i > 1000 {
			t.Fatalf("%d files of 4 MiB fit in %s: not the size-limited filesystem", i, dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const fullDiskCatalog = "cluster: full\nmembership: {lease_ttl: 2s}\njobs:\n  - {name: tick, schedule: \"@every 1s\", partitions: 4, command: [\"sh\", \"-c\", \"echo \\\"$KIRA_PARTITION $KIRA_FENCING_TOKEN $KIRA_EXECUTION_ID\\\" >> %s\"]}\n"

// expectFullDiskLoudThenRecovered fills the filesystem fs under an etcd
// (whose log is etcdLog's) while member runs the job logging to runs: the
// etcd stays up, the member says so (its log, /readyz 503 naming NOSPACE,
// kira_etcd_alarm) and starts nothing; once the files are deleted, it fires
// again by itself, and no execution ran twice.
func expectFullDiskLoudThenRecovered(t *testing.T, fs string, etcd, member *proc, addr, runs string) {
	t.Helper()
	kiratest.WaitUntil(t, "every slot to fire", 30*time.Second, func() bool { return len(readRuns(t, runs)) >= 8 })
	junk := fillUp(t, fs)
	full := time.Now()
	kiratest.WaitUntil(t, "the member to say etcd refuses writes", 20*time.Second, func() bool {
		code, body := get("http://" + addr + "/readyz")
		_, metrics := get("http://" + addr + "/metrics")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "NOSPACE") &&
			strings.Contains(metrics, `kira_etcd_alarm{alarm="NOSPACE"} 1`) && strings.Contains(member.Output(), "raised the NOSPACE alarm")
	})
	if !strings.Contains(etcd.Output(), "the filesystem of the data directory is nearly full") {
		t.Fatalf("etcd does not say its filesystem is full:\n%s", etcd.Output())
	}
	time.Sleep(3 * time.Second) // full: nothing may start, etcd must stay up
	if etcd.Exited() || member.Exited() {
		t.Fatalf("a process exited on a full disk:\n%s\n%s", etcd.Output(), member.Output())
	}
	during := readRuns(t, runs)
	for _, f := range junk {
		os.Remove(f)
	}
	freed := time.Now()
	kiratest.WaitUntil(t, "the member ready again", 30*time.Second, func() bool {
		code, _ := get("http://" + addr + "/readyz")
		return code == http.StatusOK
	})
	kiratest.WaitUntil(t, "every slot to fire after the space was freed", 30*time.Second, func() bool {
		return everySlotRanAbove4(readRuns(t, runs)[len(during):])
	})
	t.Logf("full for %s; every slot fired again %s after the space was freed", freed.Sub(full).Round(time.Millisecond), time.Since(freed).Round(time.Millisecond))
	ran := map[string]bool{}
	for _, r := range readRuns(t, runs) {
		if ran[r.id] {
			t.Errorf("execution %s ran twice", r.id)
		}
		ran[r.id] = true
	}
}

func everySlotRanAbove4(runs []run) bool {
	seen := map[int]bool{}
	for _, r := range runs {
		seen[r.partition] = true
	}
	return len(seen) == 4
}

// kira etcd on a filesystem that fills up: it raises NOSPACE before a
// write finds no space (etcd would exit), and disarms once space is back.
func TestFullDiskRaisesNoSpaceAndResumes(t *testing.T) {
	fs := sizedFS(t, 256) // two WAL segments of 64 MB, the database, and room
	dir := t.TempDir()
	client, peer := freeURLs(t)
	etcd := start(t, "etcd", "--name", "full", "--data-dir", filepath.Join(fs, "etcd"), "--listen-client-urls", client,
		"--listen-peer-urls", peer, "--min-free-disk-bytes", fmt.Sprint(64<<20))
	runs := filepath.Join(dir, "runs.log")
	catalog := writeFile(t, dir, "c.yaml", fmt.Sprintf(fullDiskCatalog, runs))
	addr := freePort(t)
	member := start(t, "run", "--catalog", catalog, "--etcd", client, "--http", addr)
	expectFullDiskLoudThenRecovered(t, fs, etcd, member, addr, runs)
	if !strings.Contains(etcd.Output(), "NOSPACE alarm disarmed") {
		t.Fatalf("kira etcd did not say it disarmed:\n%s", etcd.Output())
	}
}

// kira run's embedded etcd on a filesystem that fills up: the same, with
// the default margin.
func TestFullDiskUnderTheEmbeddedEtcd(t *testing.T) {
	fs := sizedFS(t, 640) // two WAL segments, the database, and 1.5 × the 256 MiB margin
	dir := t.TempDir()
	client, peer := freeURLs(t)
	runs := filepath.Join(dir, "runs.log")
	catalog := writeFile(t, dir, "c.yaml", fmt.Sprintf(fullDiskCatalog, runs))
	addr := freePort(t)
	member := start(t, "run", "--catalog", catalog, "--data-dir", filepath.Join(fs, "kira-data"), "--embedded-client-url", client,
		"--embedded-peer-url", peer, "--http", addr)
	expectFullDiskLoudThenRecovered(t, fs, member, member, addr, runs)
}

// Without the guard (--min-free-disk-bytes 0) a filesystem filled at once
// stops etcd at its next write: kira etcd says why in plain words, and
// started again once space is freed, it serves its data and the member
// fires again, with nothing run twice.
func TestFullDiskWithoutTheGuardSaysWhyEtcdStopped(t *testing.T) {
	fs := sizedFS(t, 256)
	dir := t.TempDir()
	client, peer := freeURLs(t)
	args := []string{"etcd", "--name", "full", "--data-dir", filepath.Join(fs, "etcd"), "--listen-client-urls", client,
		"--listen-peer-urls", peer, "--min-free-disk-bytes", "0"}
	etcd := start(t, args...)
	runs := filepath.Join(dir, "runs.log")
	catalog := writeFile(t, dir, "c.yaml", fmt.Sprintf(fullDiskCatalog, runs))
	member := start(t, "run", "--catalog", catalog, "--etcd", client)
	kiratest.WaitUntil(t, "every slot to fire", 30*time.Second, func() bool { return len(readRuns(t, runs)) >= 8 })
	junk := filepath.Join(fs, "junk")
	f, err := os.Create(junk)
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = f.Write(make([]byte, 16<<20))
	}
	f.Close()
	kiratest.WaitUntil(t, "etcd to stop on the full disk", 30*time.Second, etcd.Exited)
	if want := "etcd member full stops: the filesystem of its data directory is full"; !strings.Contains(etcd.Output(), want) {
		t.Fatalf("kira etcd did not say %q:\n%s", want, etcd.Output())
	}
	if err := os.Remove(junk); err != nil {
		t.Fatal(err)
	}
	before := len(readRuns(t, runs))
	start(t, args...)
	kiratest.WaitUntil(t, "every slot to fire once etcd is started again", 60*time.Second, func() bool {
		return everySlotRanAbove4(readRuns(t, runs)[before:])
	})
	ran := map[string]bool{}
	for _, r := range readRuns(t, runs) {
		if ran[r.id] {
			t.Errorf("execution %s ran twice", r.id)
		}
		ran[r.id] = true
	}
	if member.Exited() {
		t.Fatalf("kira run exited:\n%s", member.Output())
	}
}
