package api

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// GET /v1/health lists a NOSPACE alarm raised in a real etcd, with what to
// do, first, and no more once it is disarmed; GET /v1/members answers a
// member with its lease.
func TestHealthListsEtcdAlarmsAndMembers(t *testing.T) {
	cli := storedCatalog(t)
	ctx := context.Background()
	srv := httptest.NewServer(Handler(Config{KV: cli, Cluster: "c", Leases: cli, Maintenance: cli}))
	defer srv.Close()
	lease, err := cli.Grant(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, keyspace.Member("c", "m1"), `{"id":"m1","name":"one"}`, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	var ms []ops.MemberView
	if code := call(t, srv.Client(), "GET", srv.URL+"/v1/members", "", "", &ms); code != 200 || len(ms) != 1 || ms[0].Name != "one" ||
		ms[0].LeaseTTLSeconds == nil || *ms[0].LeaseTTLSeconds != 20 || ms[0].LastSeen == nil {
		t.Fatalf("members: %d %+v", code, ms)
	}

	st, err := cli.Status(ctx, cli.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: st.Header.MemberId, Alarm: pb.AlarmType_NOSPACE}); err != nil {
		t.Fatal(err)
	}
	var problems []ops.Problem
	if code := call(t, srv.Client(), "GET", srv.URL+"/v1/health", "", "", &problems); code != 200 || len(problems) == 0 ||
		problems[0].Kind != "etcd_alarm" || !strings.Contains(problems[0].Message, "NOSPACE") || !strings.Contains(problems[0].Message, "disarm") {
		t.Fatalf("health with NOSPACE raised: %d %+v", code, problems)
	}
	if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: st.Header.MemberId, Alarm: pb.AlarmType_NOSPACE}); err != nil {
		t.Fatal(err)
	}
	problems = nil
	if code := call(t, srv.Client(), "GET", srv.URL+"/v1/health", "", "", &problems); code != 200 {
		t.Fatalf("health once disarmed: %d %+v", code, problems)
	}
	for _, p := range problems { // m1 leads nothing and runs no catalog: those lines stay
		if p.Kind == "etcd_alarm" {
			t.Fatalf("health once disarmed: %+v", problems)
		}
	}
}

// GET /v1/members after a member's crash, three real members: the two
// left each show their part in the failover, the crashed member's slots
// (as it led them before the crash) split between them, the one that took
// more leading, each acting after the crashed member's last record; the
// slots it gave up as the others joined are no part of it. Then a graceful
// stop of one of the two is the last failover: the last member took over
// all its slots.
func TestMembersShowTheLastFailover(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	a, crashA := startMember(t, etcd.Endpoints(), "a")
	b, _ := startMember(t, etcd.Endpoints(), "b")
	startMember(t, etcd.Endpoints(), "c")
	srv := httptest.NewServer(Handler(Config{KV: cli, Cluster: "tl", Leases: cli}))
	defer srv.Close()
	members := func() []ops.MemberView {
		var ms []ops.MemberView
		if code := call(t, srv.Client(), "GET", srv.URL+"/v1/members", "", "", &ms); code != 200 {
			t.Fatalf("GET /v1/members: %d", code)
		}
		return ms
	}
	// settled reports whether every slot of the catalog has an owner
	// whose last two records are its newest, and returns how many slots
	// the member id leads.
	settled := func(id string) (int, bool) {
		led := 0
		for _, job := range []string{"tick", "broken", "wide"} {
			tl, err := ops.ReadTimeline(context.Background(), cli, nil, nil, nil, "tl", ops.TimelineQuery{From: time.Now().Add(-time.Minute), To: time.Now(), Bucket: time.Second, Job: job})
			if err != nil {
				return 0, false
			}
			for _, s := range tl.Jobs[0].Slots {
				n := len(s.Executions)
				if n < 2 || s.Owner == "" || s.Executions[n-1].Member != s.Owner || s.Executions[n-2].Member != s.Owner {
					return 0, false
				}
				if s.Owner == id {
					led++
				}
			}
		}
		return led, true
	}
	var led int
	kiratest.WaitUntil(t, "the 23 slots split over a, b and c, with records, and no failover yet", 40*time.Second, func() bool {
		ms := members()
		for _, m := range ms {
			if m.LastFailover != nil {
				t.Fatalf("a failover before any member left: %+v", m)
			}
		}
		var ok bool
		led, ok = settled(a.ID())
		return len(ms) == 3 && ok && led > 0
	})
	crashed := time.Now()
	crashA()
	kiratest.WaitUntil(t, fmt.Sprintf("b and c took over a's %d slots", led), 30*time.Second, func() bool {
		ms := members()
		if len(ms) != 2 {
			return false
		}
		// The new split may give all of a's slots to one of them (and move
		// one of its own to the other): a member that took none has no part.
		sum, most := 0, 0
		for _, m := range ms {
			f := m.LastFailover
			if f == nil {
				continue
			}
			if f.Left != a.ID() || f.Of != led {
				return false
			}
			sum += f.Slots
			most = max(most, f.Slots)
		}
		if sum != led {
			return false
		}
		leaders := 0
		for _, m := range ms {
			f := m.LastFailover
			if f == nil {
				continue
			}
			if f.LedMost {
				leaders++
				if f.Slots != most {
					t.Fatalf("%s leads with %d slots; another took %d: %+v", m.Name, f.Slots, most, ms)
				}
			}
			if f.LeftLastRecord.After(crashed) || f.At.Before(f.LeftLastRecord) {
				t.Fatalf("%s: a's last record at %v (crashed at %v), %s first acted at %v", m.Name, f.LeftLastRecord, crashed, m.Name, f.At)
			}
		}
		if leaders != 1 {
			t.Fatalf("%d members lead the failover: %+v, %+v", leaders, ms[0].LastFailover, ms[1].LastFailover)
		}
		return true
	})

	// b stops gracefully (as on SIGTERM): c takes over all of b's slots,
	// and that is the last failover now.
	kiratest.WaitUntil(t, "the 23 slots split over b and c, with records", 40*time.Second, func() bool {
		var ok bool
		led, ok = settled(b.ID())
		return ok && led > 0
	})
	b.Stop()
	if err := b.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	kiratest.WaitUntil(t, fmt.Sprintf("c took over b's %d slots", led), 30*time.Second, func() bool {
		ms := members()
		if len(ms) != 1 || ms[0].LastFailover == nil || ms[0].LastFailover.Left != b.ID() {
			return false
		}
		f := ms[0].LastFailover
		if f.Of > led || f.Slots != f.Of || !f.LedMost {
			t.Fatalf("c's part in b's stop, of %d slots b led: %+v", led, f)
		}
		return f.Of == led
	})
}
