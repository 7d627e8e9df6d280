package api

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/keyspace"
	"github.com/kira-scheduler/kira/operator"
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
	var ms []operator.MemberView
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
	var problems []operator.Problem
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
