package httpfence

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// EtcdStore keeps the highest admitted token of each resource in etcd, so
// that every replica of a service using the same etcd and prefix is fenced as
// one: the token lives at Prefix+"tokens/"+resource and only rises (a
// compare-and-swap on the key's mod revision). Hold also takes an etcd mutex
// (concurrency.Mutex at Prefix+"holds/"+resource) for the request's duration.
// The etcd may be the service's own or Kira's, under a prefix the service is
// granted. TestSharedStoreFencesReplicasAsOne and
// TestConcurrentRaisesNeverLowerTheToken hold it.
type EtcdStore struct {
	cli    *clientv3.Client
	prefix string
	opts   []concurrency.SessionOption

	mu      sync.Mutex
	session *concurrency.Session
}

// NewEtcdStore returns a store under prefix (for example "/svc/fences/").
// opts configure the session whose lease the holds are attached to (its TTL
// bounds how long a crashed replica's hold blocks the others); Close ends it.
func NewEtcdStore(cli *clientv3.Client, prefix string, opts ...concurrency.SessionOption) *EtcdStore {
	return &EtcdStore{cli: cli, prefix: prefix, opts: opts}
}

// Close revokes the session of the store's holds, if one was started.
func (s *EtcdStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == nil {
		return nil
	}
	err := s.session.Close()
	s.session = nil
	return err
}

func (s *EtcdStore) tokenKey(resource string) string { return s.prefix + "tokens/" + resource }

// Admit implements Store: one read, then compare-and-swap transactions until
// the token is stored or a token at least as high is seen.
func (s *EtcdStore) Admit(ctx context.Context, resource string, token fencing.Token) (fencing.Token, bool, error) {
	key := s.tokenKey(resource)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return 0, false, fmt.Errorf("httpfence: read %s: %w", key, err)
	}
	kvs := resp.Kvs
	for {
		var highest fencing.Token
		var rev int64 // 0: the key does not exist
		if len(kvs) == 1 {
			if highest, err = fencing.ParseToken(string(kvs[0].Value)); err != nil {
				return 0, false, fmt.Errorf("httpfence: %s: %w", key, err)
			}
			rev = kvs[0].ModRevision
		}
		if token <= highest {
			return highest, token == highest, nil
		}
		txn, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, token.String())).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return 0, false, fmt.Errorf("httpfence: raise %s: %w", key, err)
		}
		if txn.Succeeded {
			return token, true, nil
		}
		kvs = txn.Responses[0].GetResponseRange().Kvs
	}
}

// Hold implements Holder: the resource's etcd mutex, then Admit. The mutex
// is released by release, or by etcd when the session's lease expires: a
// replica that dies while holding blocks the others for at most the TTL, and
// one paused (GC, SIGSTOP) or cut off from etcd for longer than the TTL loses
// its hold without knowing it, so another replica can admit a newer token
// while its request still runs. No store can stop what that request does when
// it resumes; Guard.Wrap cancels its context once the session is seen lost,
// and a write to this etcd conditioned on HeldCmps commits only while the
// hold stands (TestPausedHolderCannotCommit).
func (s *EtcdStore) Hold(ctx context.Context, resource string, token fencing.Token) (fencing.Token, bool, func(), error) {
	_, highest, ok, release, err := s.holdContext(ctx, resource, token)
	return highest, ok, release, err
}

type heldKey struct{}

// holdContext is Hold, also returning ctx cancelled when the hold's session
// ends and carrying its HeldCmps.
func (s *EtcdStore) holdContext(ctx context.Context, resource string, token fencing.Token) (context.Context, fencing.Token, bool, func(), error) {
	session, err := s.liveSession()
	if err != nil {
		return ctx, 0, false, nil, err
	}
	m := concurrency.NewMutex(session, s.prefix+"holds/"+resource)
	if err := m.Lock(ctx); err != nil {
		return ctx, 0, false, nil, fmt.Errorf("httpfence: hold %s: %w", resource, err)
	}
	held, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-session.Done():
			cancel()
		case <-held.Done():
		}
	}()
	release := func() {
		cancel()
		ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer stop()
		m.Unlock(ctx) // on failure the lease's expiry releases it
	}
	highest, ok, err := s.Admit(ctx, resource, token)
	if err != nil || !ok {
		release()
		return ctx, highest, false, nil, err
	}
	cmps := []clientv3.Cmp{m.IsOwner(), clientv3.Compare(clientv3.Value(s.tokenKey(resource)), "=", token.String())}
	return context.WithValue(held, heldKey{}, cmps), highest, true, release, nil
}

// HeldCmps returns, in a handler guarded by an EtcdStore, the comparisons
// that hold while its request's hold does: the hold's mutex key is still
// this request's and the resource's token is still the request's. A write to
// the store's etcd in a transaction If(cmps...) commits only then; ok is
// false outside such a handler. A write anywhere else is not protected by
// them: fence it there (pgfence), with the request's token.
func HeldCmps(ctx context.Context) (cmps []clientv3.Cmp, ok bool) {
	cmps, ok = ctx.Value(heldKey{}).([]clientv3.Cmp)
	return cmps, ok
}

// liveSession returns the store's session, starting a new one when there is
// none or the last one's lease was lost (TestEtcdStoreOutlivesItsSession).
func (s *EtcdStore) liveSession() (*concurrency.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != nil {
		select {
		case <-s.session.Done():
			s.session = nil
		default:
			return s.session, nil
		}
	}
	session, err := concurrency.NewSession(s.cli, s.opts...)
	if err != nil {
		return nil, fmt.Errorf("httpfence: etcd session: %w", err)
	}
	s.session = session
	return session, nil
}
