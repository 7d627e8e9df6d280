package httpfence

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Replica R1 admits token 17 and writes under it; then it is paused past its
// session TTL (etcd revokes its lease, as expiry would); replica R2 admits 42
// meanwhile; R1 resumes and writes again. Its write conditioned on HeldCmps
// is refused, and its context is cancelled.
func TestPausedHolderCannotCommit(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli1, cli2 := etcdtest.NewClient(t, etcd.Endpoints()...), etcdtest.NewClient(t, etcd.Endpoints()...)
	s1 := NewEtcdStore(cli1, "/svc/fences/", concurrency.WithTTL(5))
	s2 := NewEtcdStore(cli2, "/svc/fences/", concurrency.WithTTL(5))
	t.Cleanup(func() { s1.Close(); s2.Close() })
	entered, resume := make(chan struct{}), make(chan struct{})
	results := make(chan bool, 2)
	var cancelled error
	r1 := New(s1, nil).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cmps, ok := HeldCmps(r.Context())
		if !ok {
			t.Error("no HeldCmps in an EtcdStore's handler")
		}
		write := func(v string) bool {
			txn, err := cli1.Txn(context.Background()).If(cmps...).Then(clientv3.OpPut("/svc/data", v)).Commit()
			if err != nil {
				t.Error(err)
				return false
			}
			return txn.Succeeded
		}
		results <- write("before the pause")
		close(entered)
		<-resume
		kiratest.WaitUntil(t, "the request's context to end", 15*time.Second, func() bool { return r.Context().Err() != nil })
		cancelled = r.Context().Err()
		results <- write("after the pause")
	}))
	r2 := New(s2, nil).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	req := func(token fencing.Token) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/write", nil)
		r.Header.Set(HeaderJob, "billing")
		r.Header.Set(HeaderPartition, "3")
		r.Header.Set(fencing.HeaderToken, token.String())
		return r
	}
	r1done := make(chan struct{})
	go func() { defer close(r1done); r1.ServeHTTP(httptest.NewRecorder(), req(17)) }()
	kiratest.Receive(t, entered, 10*time.Second, "R1 in its handler")
	if !<-results {
		t.Fatal("R1's write while it held the resource was refused")
	}
	session, err := s1.liveSession()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli2.Revoke(context.Background(), session.Lease()); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	r2.ServeHTTP(w, req(42)) // the hold lapsed: admitted while R1's request runs
	if w.Code != http.StatusNoContent {
		t.Fatalf("R2's 42: %d %s", w.Code, w.Body)
	}
	close(resume)
	kiratest.Receive(t, r1done, 30*time.Second, "R1's answer")
	if <-results {
		t.Fatal("R1's write under 17 committed after R2 admitted 42")
	}
	if cancelled == nil {
		t.Fatal("R1's context was not cancelled when its session ended")
	}
	resp, err := cli2.Get(context.Background(), "/svc/data")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "before the pause" {
		t.Fatalf("/svc/data: %v, %v", resp.Kvs, err)
	}
}
