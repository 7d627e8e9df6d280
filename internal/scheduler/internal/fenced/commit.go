package fenced

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/shard"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func (w *Writer) commitBatch(ctx context.Context, b []Write, t *taken) {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	if p := t.plan; p != nil && (p.copy || p.handover != nil) {
		if err := w.tracked(func() error { return w.index.fill(ctx, w.kv, b, p) }); err != nil && p.copy {
			for _, fw := range b {
				reply(fw, fmt.Errorf("fenced: reading back the records to copy: %w", err))
			}
			return // copied again with the next batch
		}
	}
	if p := t.plan; p != nil && p.copy {
		w.commitCopies(ctx, b)
		return
	}
	w.commit(ctx, b, t.plan)
}

// commitCopies commits copy batch b in one transaction if every guard
// holds, else each copy on its own, answering a copy whose guard fails
// with errTakenOver if the slot's state key holds a newer token than the
// copy's claim, else with notCopied.
func (w *Writer) commitCopies(ctx context.Context, b []Write) {
	cmps := make([]clientv3.Cmp, 0, len(b))
	var ops []clientv3.Op
	for _, fw := range b {
		cmps = append(cmps, fw.guard)
		ops = append(ops, fw.Ops...)
	}
	resp, err := w.send(w.kv.Txn(ctx).If(cmps...).Then(ops...))
	if err == nil && resp.Succeeded {
		for _, fw := range b {
			reply(fw, nil)
		}
		return
	}
	for _, fw := range b {
		resp, err := w.send(w.kv.Txn(ctx).If(fw.guard).Then(fw.Ops...).Else(clientv3.OpGet(fw.stateKey)))
		switch {
		case err != nil:
			reply(fw, fmt.Errorf("fenced: copy: %w", err))
		case resp.Succeeded:
			reply(fw, nil)
		default:
			reply(fw, refusedCopy(fw.Claim, fw.copies[0].h.js.slot, resp.Responses[0].GetResponseRange().Kvs))
		}
	}
}

// refusedCopy is the answer to a copy under claim whose guard failed, the
// slot's state key being kvs.
func refusedCopy(claim fencing.Claim, s shard.Slot, kvs []*mvccpb.KeyValue) error {
	if len(kvs) == 0 {
		return notCopied{}
	}
	if st, err := history.DecodeState(s, kvs[0].Value); err == nil && st.Token > claim.Token {
		return errTakenOver
	}
	return notCopied{stateRev: kvs[0].ModRevision}
}

func fenceCompare(c fencing.Claim) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(c.LeaderKey), "=", int64(c.Token))
}

// commit commits a batch in one transaction. If that fails because some
// claims no longer hold, it reads which hold (one request), refuses the
// writes of the others with ErrFenced and commits the rest together.
func (w *Writer) commit(ctx context.Context, b []Write, p *plan) {
	if w.commitAll(ctx, b, p) || len(b) == 1 {
		return
	}
	claims := map[fencing.Claim]bool{}
	var gets []clientv3.Op
	var order []fencing.Claim
	for _, fw := range b {
		if _, ok := claims[fw.Claim]; !ok {
			claims[fw.Claim] = false
			order = append(order, fw.Claim)
			gets = append(gets, clientv3.OpGet(fw.Claim.LeaderKey))
		}
	}
	resp, err := w.kv.Txn(ctx).Then(gets...).Commit()
	if err != nil {
		for _, fw := range b {
			reply(fw, fmt.Errorf("fenced: state write: %w", err))
		}
		return
	}
	for i, c := range order {
		kvs := resp.Responses[i].GetResponseRange().Kvs
		claims[c] = len(kvs) == 1 && kvs[0].CreateRevision == int64(c.Token)
	}
	var holding []Write
	for _, fw := range b {
		if claims[fw.Claim] {
			holding = append(holding, fw)
		} else {
			reply(fw, fmt.Errorf("%w: state write for %s", fencing.ErrFenced, fw.Claim.LeaderKey))
		}
	}
	if len(holding) > 0 && !w.commitAll(ctx, holding, p) {
		for _, fw := range holding { // a claim ended in between: one by one
			w.commitAll(ctx, []Write{fw}, p)
		}
	}
}

// commitAll commits b in one transaction if every claim holds, answering
// every write; it reports whether it did. A single write is always answered.
// With a journal plan p, the transaction also puts p's entry (the records
// of b and of the writes of p's batch committed before) and makes p's
// copies; its writes are added to p.landed when it commits.
func (w *Writer) commitAll(ctx context.Context, b []Write, p *plan) bool {
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	seen := map[fencing.Claim]bool{}
	guarded := map[int]int{} // write → its nested transaction's operation
	for i, fw := range b {
		if !seen[fw.Claim] {
			seen[fw.Claim] = true
			cmps = append(cmps, fenceCompare(fw.Claim))
		}
		if fw.Guard != nil {
			guarded[i] = len(ops)
			ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{*fw.Guard}, fw.Ops, nil))
		} else {
			ops = append(ops, fw.Ops...)
		}
		ops = append(ops, fw.state...)
		if p != nil && fw.Handover {
			ops = append(ops, p.handoverOps[fw.Claim]...)
		}
	}
	if p != nil && p.entry >= 0 {
		ops = append(ops, w.index.entryPut(p, append(slices.Clip(p.landed), b...)))
	}
	resp, err := w.send(w.kv.Txn(ctx).If(cmps...).Then(ops...))
	switch {
	case err == nil && resp.Succeeded:
		if p != nil {
			p.committed(b, resp.Header.Revision)
		}
		for i, fw := range b {
			if op, ok := guarded[i]; ok && !resp.Responses[op].GetResponseTxn().GetSucceeded() {
				reply(fw, ErrGuard)
				continue
			}
			reply(fw, nil)
		}
		return true
	case len(b) > 1:
		return false
	case err != nil:
		reply(b[0], fmt.Errorf("fenced: state write: %w", err))
	default:
		reply(b[0], fmt.Errorf("%w: state write for %s", fencing.ErrFenced, b[0].Claim.LeaderKey))
	}
	return true
}

// send commits txn, tracked (see tracked).
func (w *Writer) send(txn clientv3.Txn) (resp *clientv3.TxnResponse, err error) {
	err = w.tracked(func() error {
		resp, err = txn.Commit()
		return err
	})
	return resp, err
}

// tracked makes request, one of the writer's requests to etcd (a commit,
// or the read-back of a copy), keeping what Stalled reads: the requests in
// flight and when each began, when one last succeeded, whether etcd fails
// them. A copy that etcd fails or hangs holds up the records waiting for
// its entry, so it counts as their commit would.
func (w *Writer) tracked(request func() error) error {
	w.mu.Lock()
	w.seq++
	id, began := w.seq, time.Now()
	w.since[id] = began
	w.mu.Unlock()
	err := request()
	w.mu.Lock()
	delete(w.since, id)
	if err == nil {
		w.landed = time.Now()
		if began.After(w.overtook) {
			w.overtook = began
		}
	}
	w.mu.Unlock()
	w.failing.Store(err != nil)
	return err
}

func reply(fw Write, err error) {
	if fw.Done != nil {
		fw.Done <- err
	}
}
