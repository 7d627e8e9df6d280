package config

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/kira-scheduler/kira/internal/etcdtest"
)

// A job read with GetJob, written with MarshalJob (YAML) or MarshalJobJSON
// and put back, is stored unchanged: the API's definition can be edited
// and put back; a catalog's notify default stays turned off where it was.
func TestMarshalJobRoundTrips(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, "cluster: c\npools: {small: 2}\nnotify: [{on: [failed], webhook: 'https://hooks.example/x'}]\njobs:\n"+
		"  - {name: a, schedule: '@hourly', handler: noop}\n"+
		"  - {name: off, schedule: '@hourly', handler: noop, notify: []}\n"+
		"  - {name: dep, after: [a], command: [sh, -c, ':'], env: {A: b}}\n"+
		"  - name: rich\n    schedule: '*/5 * * * *'\n    timezone: Europe/Istanbul\n    partitions: 3\n    timeout: 90s\n    jitter: 2s\n    pool: small\n"+
		"    retries: {max: 2, backoff: 1s, max_backoff: 10s}\n    http: {url: 'https://svc.example/run', method: POST, headers: {X-Key: k}, body: '{}'}\n"+
		"    placement: {labels: {zone: a}}\n    misfire: fire-all\n    catchup_window: 1h\n")
	for _, name := range []string{"a", "off", "dep", "rich"} {
		for _, enc := range []struct {
			what    string
			marshal func(Job) ([]byte, error)
		}{{"yaml", MarshalJob}, {"json", MarshalJobJSON}} {
			before, err := GetJob(ctx, cli, "c", name)
			if err != nil {
				t.Fatal(err)
			}
			data, err := enc.marshal(before.Job)
			if err != nil {
				t.Fatal(err)
			}
			w, err := PutJob(ctx, cli, "c", data, name, PutJobOptions{Manager: signup, Force: true})
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", name, enc.what, err, data)
			}
			after, err := GetJob(ctx, cli, "c", name)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(before.Job, after.Job) {
				t.Fatalf("%s through %s (written: %+v):\n%s\nbefore %+v\nafter  %+v", name, enc.what, w, data, before.Job, after.Job)
			}
		}
	}
}

// Check sees the stored job and the new one before the commit, and its
// error is the write's: nothing is written.
func TestCheckDecidesBeforeTheCommit(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	refuse := errors.New("not yours")
	var saw [2]*Job
	_, err := PutJob(ctx, cli, "c", []byte("schedule: '@daily'\nhandler: noop\n"), "a", PutJobOptions{Manager: signup, Force: true,
		Check: func(stored, next *Job) error { saw = [2]*Job{stored, next}; return refuse }})
	if !errors.Is(err, refuse) || saw[0] == nil || saw[0].Schedule != "@hourly" || saw[1] == nil || saw[1].Schedule != "@daily" {
		t.Fatalf("put: %v, saw %+v", err, saw)
	}
	if _, err := DeleteJob(ctx, cli, "c", "b", DeleteJobOptions{Manager: signup, Force: true,
		Check: func(stored, next *Job) error { saw = [2]*Job{stored, next}; return refuse }}); !errors.Is(err, refuse) || saw[0] == nil || saw[1] != nil {
		t.Fatalf("delete: %v, saw %+v", err, saw)
	}
	for _, name := range []string{"a", "b"} {
		if j, err := GetJob(ctx, cli, "c", name); err != nil || j.Manager != ManagerApply {
			t.Fatalf("%s after refused writes: %+v %v", name, j, err)
		}
	}
}
