package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdnode"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/ops"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// GET /v1/health reads what every member says it leads from its /metrics:
// two kira run members, each slot claimed once, nothing to say. A stale
// member record that gives b's address again (as a second member at the
// same address would) makes each of b's slots claimed by two members, and
// the line names them; a record at an address nobody serves is named as
// unread. The job's placement keeps its slots off the two records. TestTwoLeadersNamesTheSlotAndWhatToDo holds the
// wording.
func TestHealthAsksTheMembersWhatTheyLead(t *testing.T) {
	etcd := etcdtest.Start(t)
	catalog := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(catalog, []byte("cluster: two\nmembership: {lease_ttl: 2s}\njobs:\n  - {name: tick, schedule: \"@every 1s\", partitions: 4, command: [\"true\"], placement: {labels: {role: worker}}}\n"), 0o600)
	addrs, err := etcdnode.FreeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	addrA, addrB, nobody := addrs[0], addrs[1], addrs[2]
	start(t, "run", "--catalog", catalog, "--etcd", etcd.Endpoints()[0], "--name", "a", "--http", addrA, "--label", "role=worker")
	start(t, "run", "--catalog", catalog, "--etcd", etcd.Endpoints()[0], "--name", "b", "--http", addrB, "--label", "role=worker")
	health := func() []ops.Problem {
		resp, err := http.Get("http://" + addrA + "/v1/health")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var p []ops.Problem
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&p) != nil {
			return nil
		}
		return p
	}
	cli := etcd.Client(t)
	ctx := context.Background()
	kiratest.WaitUntil(t, "both members leading 2 slots each, and a healthy banner", 40*time.Second, func() bool {
		st, err := ops.ReadStatus(ctx, cli, "two")
		if err != nil {
			return false
		}
		led := map[string]int{}
		for _, s := range st.Slots {
			led[s.Owner]++
		}
		p := health()
		return len(st.Members) == 2 && len(led) == 2 && led[""] == 0 && p != nil && len(p) == 0
	})
	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	for id, addr := range map[string]string{"stale": addrB, "gone": nobody} {
		rec, _ := json.Marshal(member.Record{ID: id, Name: id, HTTP: addr})
		if _, err := cli.Put(ctx, keyspace.Member("two", id), string(rec), clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	kiratest.WaitUntil(t, "b's 2 slots claimed by b and stale, gone unread", 20*time.Second, func() bool {
		var two, unread string
		for _, p := range health() {
			switch p.Kind {
			case "two_leaders":
				two = p.Message
			case "members_unread":
				unread = p.Message
			}
		}
		return strings.Contains(two, "2 slot(s)") && strings.Contains(two, "(b and stale)") && strings.Contains(unread, "gone")
	})
}
