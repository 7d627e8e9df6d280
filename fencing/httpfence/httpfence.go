// Package httpfence is net/http middleware for a service that Kira's HTTP
// jobs call: it rejects the late requests of a paused or partitioned
// ex-leader.
//
// Each request carries Kira-Fencing-Token, Kira-Job and Kira-Partition. The
// middleware keeps, per resource (by default the slot, job/partition), the
// highest token it has admitted, in a Store. A request whose token is lower is
// answered 409 Conflict with a JSON body and never reaches the handler; Kira's
// HTTP executor takes a 409 as "fenced" and gives the slot up.
//
// Requests of one resource are serialised inside the middleware: the token
// check and the handler's work happen under one lock, so within one process
// an old request that was admitted cannot still be running when a newer
// token is admitted.
//
// MemoryStore fences one process. Several replicas of a service behind a load
// balancer share a store: EtcdStore (here) or pgfence.Store. Both are
// Holders, so the serialisation above spans the replicas too: a newer token's
// admission on one replica waits until an older request admitted on another
// has been answered, or until that replica's hold lapsed (EtcdStore: its
// session lease expired while it was paused or cut off). A lapsed request
// may still run and cause its side effects when it resumes: only the
// resource it writes can refuse them (EtcdStore: HeldCmps; pgfence).
//
// Raise the fence on acquire: point a job's fence_url at a path served by this
// middleware (with a handler that does nothing). Kira calls it with the new
// token before the slot's first execution, so an ex-leader's request that
// arrives between the acquisition and the first execution is already refused.
package httpfence

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/kira-scheduler/kira/fencing"
)

// Headers read from each request; the same names Kira's HTTP executor sends.
const (
	HeaderJob       = "Kira-Job"
	HeaderPartition = "Kira-Partition"
)

// Store keeps the highest admitted token per resource.
type Store interface {
	// Admit records token for resource if it is not lower than the highest
	// admitted so far, and returns the highest after the call.
	Admit(ctx context.Context, resource string, token fencing.Token) (highest fencing.Token, admitted bool, err error)
}

// Holder is a Store that can keep an admission for as long as the request
// runs: until release is called or the store's own bound on a hold passes
// (EtcdStore: its session lease; pgfence.Store: its connection), no other
// Hold of the resource (by any replica sharing the store) returns. A holder
// paused past that bound does not learn in time that it lost the hold.
// Release is nil unless admitted.
// Guard.Wrap uses Hold when its store has it (TestSharedStoreHoldsAcrossReplicas).
type Holder interface {
	Store
	Hold(ctx context.Context, resource string, token fencing.Token) (highest fencing.Token, admitted bool, release func(), err error)
}

// MemoryStore is a Store in this process's memory.
type MemoryStore struct {
	mu      sync.Mutex
	highest map[string]fencing.Token
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{highest: map[string]fencing.Token{}} }

// Admit implements Store.
func (m *MemoryStore) Admit(_ context.Context, resource string, token fencing.Token) (fencing.Token, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.highest[resource]; token < h {
		return h, false, nil
	}
	m.highest[resource] = token
	return token, true, nil
}

// Rejection is the JSON body of a 409 (and of a 400 for a missing token).
type Rejection struct {
	Error    string        `json:"error"`
	Resource string        `json:"resource,omitempty"`
	Token    fencing.Token `json:"token,omitempty"`
	Highest  fencing.Token `json:"highest,omitempty"`
}

// ResourceFunc names the resource a request protects. Tokens order the
// leaders of one slot only (slots won together share one), so a resource
// names one slot, or part of one: never several.
type ResourceFunc func(*http.Request) (string, error)

// BySlot names the resource after the request's job and partition headers.
func BySlot(r *http.Request) (string, error) {
	job, part := r.Header.Get(HeaderJob), r.Header.Get(HeaderPartition)
	if job == "" {
		return "", errors.New("missing " + HeaderJob + " header")
	}
	if part == "" {
		part = "0"
	}
	return job + "/" + part, nil
}

// Guard is the middleware. The zero value is not usable: use New.
type Guard struct {
	store    Store
	resource ResourceFunc
	locks    sync.Map // resource → *sync.Mutex
}

// New returns a Guard over store; resource defaults to BySlot.
func New(store Store, resource ResourceFunc) *Guard {
	if resource == nil {
		resource = BySlot
	}
	return &Guard{store: store, resource: resource}
}

// Wrap returns next guarded by the fence.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw := strings.TrimSpace(r.Header.Get(fencing.HeaderToken))
		if raw == "" {
			reject(w, http.StatusBadRequest, Rejection{Error: "missing " + fencing.HeaderToken + " header"})
			return
		}
		token, err := fencing.ParseToken(raw)
		if err != nil {
			reject(w, http.StatusBadRequest, Rejection{Error: err.Error()})
			return
		}
		resource, err := g.resource(r)
		if err != nil {
			reject(w, http.StatusBadRequest, Rejection{Error: err.Error()})
			return
		}
		mu, _ := g.locks.LoadOrStore(resource, &sync.Mutex{})
		mu.(*sync.Mutex).Lock()
		defer mu.(*sync.Mutex).Unlock()
		ctx, highest, ok, release, err := g.admit(r.Context(), resource, token)
		if err != nil {
			reject(w, http.StatusServiceUnavailable, Rejection{Error: "fence store: " + err.Error(), Resource: resource})
			return
		}
		if !ok {
			reject(w, http.StatusConflict, Rejection{Error: "fenced", Resource: resource, Token: token, Highest: highest})
			return
		}
		defer release()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// admit asks the store, holding the admission where the store can, and
// returns the handler's context.
func (g *Guard) admit(ctx context.Context, resource string, token fencing.Token) (context.Context, fencing.Token, bool, func(), error) {
	if h, ok := g.store.(*EtcdStore); ok {
		return h.holdContext(ctx, resource, token)
	}
	if h, ok := g.store.(Holder); ok {
		highest, ok, release, err := h.Hold(ctx, resource, token)
		return ctx, highest, ok, release, err
	}
	highest, ok, err := g.store.Admit(ctx, resource, token)
	return ctx, highest, ok, func() {}, err
}

func reject(w http.ResponseWriter, code int, body Rejection) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(body)
}
