package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
)

// The members view in Chromium, three kira run members: no failover while
// all live (the slots a gave up as b and c joined are none); after a kill
// -9 of c, the line above the table names c as lost and the member that
// GET /v1/members says led most, with its count of c's slots, and each
// survivor's row its own part.
func TestMembersViewShowsTheLastFailover(t *testing.T) {
	chromium(t)
	etcd := etcdtest.Start(t)
	catalog := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(catalog, []byte("cluster: fo\nmembership: {lease_ttl: 2s}\njobs:\n  - {name: tick, schedule: \"@every 1s\", partitions: 6, history_limit: 100, command: [\"true\"]}\n"), 0o600)
	addr := freePort(t)
	procs := map[string]*proc{}
	for _, n := range []string{"a", "b", "c"} {
		args := []string{"run", "--catalog", catalog, "--etcd", etcd.Endpoints()[0], "--name", n}
		if n == "a" {
			args = append(args, "--http", addr)
		}
		procs[n] = start(t, args...)
	}
	members := func() []ops.MemberView {
		resp, err := http.Get("http://" + addr + "/v1/members")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var ms []ops.MemberView
		json.NewDecoder(resp.Body).Decode(&ms)
		return ms
	}
	page := openDashboard(t, "http://"+addr+"/#members", 2*time.Minute)
	const rows = `[...document.querySelectorAll('#member-list tbody tr')].map((tr) => tr.dataset.name + "|" + tr.querySelector(".failover").textContent).sort().join("\n")`
	var cID string
	kiratest.WaitUntil(t, "three members leading tick 2/6 each, with records, and no failover", 40*time.Second, func() bool {
		ms := members()
		for _, m := range ms {
			if m.Name == "c" {
				cID = m.ID
			}
			if len(m.Jobs) != 1 || m.Jobs[0].Slots != 2 {
				return false
			}
		}
		return len(ms) == 3 && page(rows) == "a|-\nb|-\nc|-" && page(`document.getElementById("last-failover").textContent`) == "No failover in the records the slots keep."
	})
	kiratest.WaitUntil(t, "two records of each slot under its holder", 20*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/v1/timeline?since=1m")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var tl ops.Timeline
		if json.NewDecoder(resp.Body).Decode(&tl) != nil || len(tl.Jobs) != 1 || len(tl.Jobs[0].Slots) != 6 {
			return false
		}
		for _, s := range tl.Jobs[0].Slots {
			n := len(s.Executions)
			if n < 2 || s.Owner == "" || s.Executions[n-1].Member != s.Owner || s.Executions[n-2].Member != s.Owner {
				return false
			}
		}
		return true
	})
	procs["c"].Cmd.Process.Kill()
	kiratest.WaitUntil(t, "the members view: c lost, its 2 slots taken over, the one leading named", 40*time.Second, func() bool {
		ms := members()
		if len(ms) != 2 {
			return false
		}
		// The new split may give both of c's slots to one survivor (and move
		// one of its own to the other): a member that took none has no part.
		var lead ops.MemberView
		want := map[string]string{}
		took := 0
		for _, m := range ms {
			f := m.LastFailover
			if f == nil {
				want[m.Name] = "-"
				continue
			}
			if f.Left != cID || f.Of != 2 {
				return false
			}
			took += f.Slots
			if f.LedMost {
				lead = m
			}
			want[m.Name] = fmt.Sprintf("%d of c's 2", f.Slots)
			if f.LedMost {
				want[m.Name] += " (led most)"
			}
		}
		if took != 2 {
			return false
		}
		if lead.ID == "" {
			t.Fatalf("no member leads the failover: %+v", ms)
		}
		line := page(`document.getElementById("last-failover").textContent`)
		return page(rows) == "a|"+want["a"]+"\nb|"+want["b"] &&
			page(`document.getElementById("last-failover").dataset.left`) == cID && page(`document.getElementById("last-failover").dataset.lead`) == lead.ID &&
			strings.HasPrefix(line, "Last failover: c left or was lost") &&
			strings.Contains(line, fmt.Sprintf("%s led the most, taking over %d of its 2 slots", lead.Name, lead.LastFailover.Slots))
	})
}
