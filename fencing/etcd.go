package fencing

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNoLeaderKey is returned when an etcd guard is made from a claim without a leader key.
var ErrNoLeaderKey = errors.New("fencing: claim has no leader key")

// EtcdGuard writes to etcd only while the claim still holds: in the same
// transaction as the write, it compares the create revision of the slot's
// leader key with the token. A paused ex-leader's key is gone (its lease
// expired) or was never the leader's at that revision, so its write fails
// with ErrFenced whatever its clock or beliefs say. This is the check etcd's
// own Mutex.IsOwner recommends.
type EtcdGuard struct {
	kv    clientv3.KV
	claim Claim
}

// NewEtcdGuard returns a guard for claim over kv (a *clientv3.Client).
func NewEtcdGuard(kv clientv3.KV, claim Claim) (*EtcdGuard, error) {
	if claim.LeaderKey == "" {
		return nil, ErrNoLeaderKey
	}
	if !claim.Token.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrInvalidToken, claim.Token)
	}
	return &EtcdGuard{kv: kv, claim: claim}, nil
}

// EtcdGuardFromContext returns a guard for the claim of the execution ctx belongs to.
func EtcdGuardFromContext(ctx context.Context, kv clientv3.KV) (*EtcdGuard, error) {
	c, ok := ClaimFromContext(ctx)
	if !ok {
		return nil, ErrNoLeaderKey
	}
	return NewEtcdGuard(kv, c)
}

// Put writes key=value if the claim still holds, else returns ErrFenced.
func (g *EtcdGuard) Put(ctx context.Context, key, value string, opts ...clientv3.OpOption) error {
	_, err := g.Do(ctx, clientv3.OpPut(key, value, opts...))
	return err
}

// Delete deletes key if the claim still holds, else returns ErrFenced.
func (g *EtcdGuard) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) error {
	_, err := g.Do(ctx, clientv3.OpDelete(key, opts...))
	return err
}

// Do applies ops atomically if the claim still holds, else returns ErrFenced.
func (g *EtcdGuard) Do(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := g.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(g.claim.LeaderKey), "=", int64(g.claim.Token))).
		Then(ops...).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("fencing: etcd guard: %w", err)
	}
	if !resp.Succeeded {
		return resp, fmt.Errorf("%w (leader key %s no longer at token %d)", ErrFenced, g.claim.LeaderKey, g.claim.Token)
	}
	return resp, nil
}
