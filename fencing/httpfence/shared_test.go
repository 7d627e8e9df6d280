package httpfence

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/fencing/pgfence"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/pgtest"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// storeKind makes the store of one replica; each replica gets its own client
// or pool on the same backend, as separate processes would.
type storeKind struct {
	name     string
	shared   bool
	newStore func(t testing.TB) Store
}

func storeKinds() []storeKind {
	memory := storeKind{name: "memory", newStore: func(testing.TB) Store { return NewMemoryStore() }}
	etcd := storeKind{name: "etcd", shared: true}
	var cluster *etcdtest.Cluster
	prefix := fmt.Sprintf("/svc/fences/%d/", time.Now().UnixNano())
	etcd.newStore = func(t testing.TB) Store {
		if cluster == nil {
			cluster = etcdtest.Start(t)
		}
		s := NewEtcdStore(etcdtest.NewClient(t, cluster.Endpoints()...), prefix, concurrency.WithTTL(5))
		t.Cleanup(func() { s.Close() })
		return s
	}
	pg := storeKind{name: "postgres", shared: true}
	table := fmt.Sprintf("http_fences_%d", time.Now().UnixNano())
	pg.newStore = func(t testing.TB) Store {
		s := pgfence.Store{DB: pgPool(t), Table: table}
		if err := s.Create(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	}
	return []storeKind{memory, etcd, pg}
}

// pgPool connects to the test server (pgtest.Pool).
func pgPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return pgtest.Pool(t, "the SQL store tests")
}

// replicas starts n replicas of a service, each with its own store, behind a
// round-robin reverse proxy: request i goes to replica i%n. Each response
// names the replica that answered in the Replica header.
type replicas struct {
	proxy   *httptest.Server
	writes  []atomic.Int64
	onWrite func(replica int, token string) // called inside a write's handler, if set
}

func startReplicas(t *testing.T, n int, newStore func(testing.TB) Store, onWrite func(replica int, token string)) *replicas {
	t.Helper()
	rs := &replicas{writes: make([]atomic.Int64, n), onWrite: onWrite}
	var backends []*url.URL
	for i := 0; i < n; i++ {
		g := New(newStore(t), nil)
		mux := http.NewServeMux()
		mux.Handle("/write", g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if rs.onWrite != nil {
				rs.onWrite(i, r.Header.Get(fencing.HeaderToken))
			}
			rs.writes[i].Add(1)
		})))
		mux.Handle("/fence", g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Replica", strconv.Itoa(i))
			mux.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		u, _ := url.Parse(srv.URL)
		backends = append(backends, u)
	}
	var next atomic.Int64
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	rs.proxy = httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(backends[int(next.Add(1)-1)%len(backends)])
		},
		Transport: transport,
	})
	t.Cleanup(rs.proxy.Close)
	return rs
}

// call sends one request through the proxy and returns the status, the
// replica that answered and the rejection body, if any.
func (rs *replicas) call(t *testing.T, path string, token fencing.Token) (int, string, Rejection) {
	req, _ := http.NewRequest(http.MethodPost, rs.proxy.URL+path, nil)
	req.Header.Set(HeaderJob, "billing")
	req.Header.Set(HeaderPartition, "3")
	req.Header.Set(fencing.HeaderToken, token.String())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, "", Rejection{}
	}
	defer resp.Body.Close()
	var rej Rejection
	json.NewDecoder(resp.Body).Decode(&rej)
	return resp.StatusCode, resp.Header.Get("Replica"), rej
}

// The fence is raised through one replica; the ex-leader's late write reaches
// the other and is refused. With a store in each replica's memory (the
// control) it is accepted: the gap the shared stores close is real.
func TestSharedStoreFencesReplicasAsOne(t *testing.T) {
	for _, kind := range storeKinds() {
		t.Run(kind.name, func(t *testing.T) {
			rs := startReplicas(t, 2, kind.newStore, nil)
			if code, replica, _ := rs.call(t, "/write", 17); code != http.StatusOK || replica != "0" {
				t.Fatalf("old leader's write: %d from replica %s", code, replica)
			}
			if code, replica, _ := rs.call(t, "/fence", 42); code != http.StatusNoContent || replica != "1" {
				t.Fatalf("new leader's raise: %d from replica %s", code, replica)
			}
			code, replica, rej := rs.call(t, "/write", 17)
			if replica != "0" {
				t.Fatalf("the stale write was answered by replica %s; the test needs it on the replica that never saw the raise", replica)
			}
			switch {
			case kind.shared && (code != http.StatusConflict || rej.Highest != 42 || rej.Token != 17 || rej.Resource != "billing/3"):
				t.Fatalf("stale write through the other replica: %d %+v; want 409 with highest 42", code, rej)
			case kind.shared && rs.writes[0].Load() != 1:
				t.Fatalf("the stale write reached the handler (%d writes)", rs.writes[0].Load())
			case !kind.shared && code != http.StatusOK:
				t.Fatalf("with per-replica memory the stale write should get through (the gap), got %d", code)
			}
			if code, _, _ := rs.call(t, "/write", 42); code != http.StatusOK {
				t.Fatalf("new leader's write: %d", code)
			}
		})
	}
}

// Many goroutines raise random tokens through both replicas at once: the
// highest stored token, sampled meanwhile, never goes down and ends at the
// highest token sent; every refusal names a higher token than the refused one.
func TestConcurrentRaisesNeverLowerTheToken(t *testing.T) {
	for _, kind := range storeKinds() {
		if !kind.shared {
			continue
		}
		t.Run(kind.name, func(t *testing.T) {
			rs := startReplicas(t, 2, kind.newStore, nil)
			probe := kind.newStore(t)
			ctx := context.Background()
			const goroutines, each = 16, 8
			var sent atomic.Int64
			stop := make(chan struct{})
			sampled := make(chan error, 1)
			go func() { // samples the stored token until stop
				var last fencing.Token
				for {
					select {
					case <-stop:
						sampled <- nil
						return
					default:
					}
					highest, _, err := probe.Admit(ctx, "billing/3", 1)
					if err == nil && highest < last {
						err = fmt.Errorf("stored token went down from %d to %d", last, highest)
					}
					if err != nil {
						sampled <- err
						return
					}
					last = highest
				}
			}()
			var wg sync.WaitGroup
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < each; i++ {
						token := fencing.Token(2 + rand.IntN(1000))
						for max := sent.Load(); int64(token) > max && !sent.CompareAndSwap(max, int64(token)); max = sent.Load() {
						}
						code, _, rej := rs.call(t, "/fence", token)
						switch {
						case code == http.StatusConflict && rej.Highest <= token:
							t.Errorf("token %d refused with highest %d", token, rej.Highest)
						case code != http.StatusConflict && code != http.StatusNoContent:
							t.Errorf("token %d: %d %+v", token, code, rej)
						}
					}
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			kiratest.Receive(t, done, 60*time.Second, "the raises")
			close(stop)
			if err := kiratest.Receive(t, sampled, 10*time.Second, "the sampler"); err != nil {
				t.Fatal(err)
			}
			highest, _, err := probe.Admit(ctx, "billing/3", 1)
			if err != nil || int64(highest) != sent.Load() {
				t.Fatalf("stored token %d (%v); the highest sent was %d", highest, err, sent.Load())
			}
		})
	}
}

// An old request admitted on one replica is still running when the new
// leader raises the fence through the other: the raise is answered only
// after the old request is, as within one replica.
func TestSharedStoreHoldsAcrossReplicas(t *testing.T) {
	for _, kind := range storeKinds() {
		if !kind.shared {
			continue
		}
		t.Run(kind.name, func(t *testing.T) {
			entered, finish := make(chan struct{}), make(chan struct{})
			var mu sync.Mutex
			var order []string
			rs := startReplicas(t, 2, kind.newStore, func(replica int, token string) {
				close(entered)
				kiratest.Receive(t, finish, 30*time.Second, "the end of the old write")
				mu.Lock()
				order = append(order, "old write answered")
				mu.Unlock()
			})
			oldDone := make(chan int, 1)
			go func() { code, _, _ := rs.call(t, "/write", 17); oldDone <- code }()
			kiratest.Receive(t, entered, 30*time.Second, "the old write in its handler")
			raised := make(chan int, 1)
			go func() {
				code, _, _ := rs.call(t, "/fence", 42)
				mu.Lock()
				order = append(order, "raise answered")
				mu.Unlock()
				raised <- code
			}()
			// Give the raise time to reach the store; were it not held it would
			// be answered meanwhile, and the order below would show it.
			time.Sleep(300 * time.Millisecond)
			close(finish)
			if code := kiratest.Receive(t, oldDone, 30*time.Second, "the old write"); code != http.StatusOK {
				t.Fatalf("old write: %d", code)
			}
			if code := kiratest.Receive(t, raised, 30*time.Second, "the raise"); code != http.StatusNoContent {
				t.Fatalf("raise: %d", code)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(order) != 2 || order[0] != "old write answered" {
				t.Fatalf("order %v: the raise was answered while an older request was still running", order)
			}
		})
	}
}

// What a guarded request costs with each store: one request at a time
// through Guard.Wrap, the handler doing nothing (the store's round trips and
// the hold are all the cost). Figures in docs/benchmarks.md.
func BenchmarkGuardedRequest(b *testing.B) {
	for _, kind := range storeKinds() {
		store := kind.newStore(b) // once: b.Run calls its function once per b.N tried
		b.Run(kind.name, func(b *testing.B) {
			h := New(store, nil).Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			req := httptest.NewRequest(http.MethodPost, "/write", nil)
			req.Header.Set(HeaderJob, "billing")
			req.Header.Set(HeaderPartition, "3")
			req.Header.Set(fencing.HeaderToken, "42")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("request: %d %s", w.Code, w.Body)
				}
			}
		})
	}
}
