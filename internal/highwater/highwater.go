// Package highwater owns the highest etcd revision a member has seen, and
// tells when etcd goes back below it: etcd restored from a backup without
// raising its revision (etcdutl snapshot restore without --bump-revision,
// kira etcd snapshot restore --no-bump), or replaced by another cluster.
// Fencing tokens are revisions, so after such a step etcd hands out again
// tokens it handed out before, to other holders; a Mark holds back every
// token at or below the highest revision seen before the fall (Admit)
// until etcd's revision has passed it again.
//
// A Mark learns revisions from the headers of the linearizable answers of
// etcd (writes, and reads that are not serializable): those never go back
// in one etcd history, whichever member answers. Watch events and
// serializable reads may come from a member that lags, and are not used.
package highwater

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// ErrHeld is wrapped by Admit's refusal of a token at or below the mark.
var ErrHeld = errors.New("held: etcd's revision went back")

// Fix is what an operator should have done, in the words every message
// about a revision that went back uses.
const Fix = "restore with kira etcd snapshot restore (or etcdutl snapshot restore --bump-revision N --mark-compacted), which raises the revision above every token handed out"

// Mark is the highest revision a member has seen. Its zero value is not
// usable: New or Load makes one. It is safe for concurrent use.
type Mark struct {
	logger *slog.Logger
	file   string // "" keeps it in memory only

	mu        sync.Mutex
	clusterID uint64
	high      int64 // highest revision seen since the last fall
	floor     int64 // the highest revision seen before the last fall: tokens up to it are held
	falls     int   // times etcd's revision went back
	reason    string
	saved     int64 // the mark last written to file; Run's own
	failing   bool  // the last save failed; Run's own
}

// New is a Mark kept in memory only: it forgets across restarts.
func New(logger *slog.Logger) *Mark {
	if logger == nil {
		logger = slog.Default()
	}
	return &Mark{logger: logger}
}

// Observe takes the header of an answer of etcd to a request sent after
// every answer observed before: a test's, or one caller's, in turn.
func (m *Mark) Observe(clusterID uint64, rev int64) {
	m.observe(clusterID, rev, m.sent())
}

// sentMark is what the mark was when a request was sent: its answer
// reflects at least that revision, unless etcd went back. Answers to
// concurrent requests are observed in any order, so only an answer below
// the mark at its own sending is a fall.
type sentMark struct {
	high  int64
	falls int
}

func (m *Mark) sent() sentMark {
	m.mu.Lock()
	defer m.mu.Unlock()
	return sentMark{high: m.high, falls: m.falls}
}

func (m *Mark) observe(clusterID uint64, rev int64, at sentMark) {
	if rev <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := max(m.high, m.floor)
	switch {
	case seen == 0:
		m.clusterID, m.high = clusterID, rev
	case at.falls != m.falls:
		// Sent before the last fall: compared with nothing.
		if clusterID == m.clusterID {
			m.rise(rev)
		}
	case rev < at.high || (clusterID != m.clusterID && rev <= seen):
		m.fall(clusterID, rev, seen)
	case clusterID != m.clusterID:
		m.logger.Warn("etcd's cluster id changed, its revision did not go back: tokens still rise",
			"cluster_id_before", fmt.Sprintf("%x", m.clusterID), "cluster_id_now", fmt.Sprintf("%x", clusterID), "revision_before", seen, "revision_now", rev)
		m.clusterID, m.high = clusterID, rev
	default:
		m.rise(rev)
	}
}

// rise takes a revision of the current history. m.mu is held.
func (m *Mark) rise(rev int64) {
	m.high = max(m.high, rev)
	if m.reason != "" && m.high > m.floor {
		m.reason = ""
		m.logger.Warn("etcd's revision passed the high-water mark again: new tokens are above every token seen; holding ended",
			"high_water_mark", m.floor, "revision_now", m.high)
	}
}

// fall records that etcd's revision went back to rev from seen. m.mu is held.
func (m *Mark) fall(clusterID uint64, rev, seen int64) {
	m.falls++
	m.floor = max(m.floor, seen)
	what := fmt.Sprintf("etcd's revision went back from %d to %d", seen, rev)
	if clusterID != m.clusterID {
		what += fmt.Sprintf(" and its cluster id changed from %x to %x", m.clusterID, clusterID)
	}
	m.reason = what + fmt.Sprintf(": fencing tokens up to %d may be handed out again to other holders; no execution starts under them until etcd's revision passes %d", m.floor, m.floor)
	m.logger.Error(what+": etcd was restored from a backup without raising its revision, or replaced; "+Fix,
		"revision_before", seen, "revision_now", rev, "high_water_mark", m.floor,
		"cluster_id_before", fmt.Sprintf("%x", m.clusterID), "cluster_id_now", fmt.Sprintf("%x", clusterID),
		"holding", fmt.Sprintf("no execution starts under a token at or below %d until a campaign wins one above it", m.floor))
	m.clusterID, m.high = clusterID, rev
}

// Admit returns an error wrapping ErrHeld if token is at or below the
// highest revision seen before etcd's revision last went back.
func (m *Mark) Admit(token int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if token <= m.floor {
		return fmt.Errorf("%w: token %d is not above the high-water mark %d: it may name another holder too", ErrHeld, token, m.floor)
	}
	return nil
}

// Holding returns why the member holds new work, or "" when it does not:
// etcd's revision went back and has not passed the mark yet.
func (m *Mark) Holding() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reason
}

// State is what the metrics report: the highest revision seen (the mark,
// what a token must be above while holding), and how many times etcd's
// revision went back.
func (m *Mark) State() (mark int64, falls int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(m.high, m.floor), m.falls
}

// Interceptor feeds the mark with the headers of etcd's linearizable
// answers; give it to the etcd client (grpc.WithChainUnaryInterceptor).
func (m *Mark) Interceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		at := m.sent()
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err != nil {
			return err
		}
		if h := linearizableHeader(req, reply); h != nil {
			m.observe(h.ClusterId, h.Revision, at)
		}
		return nil
	}
}

// linearizableHeader is the header of an answer that reflects every write
// committed before the request was sent, or nil.
func linearizableHeader(req, reply any) *pb.ResponseHeader {
	switch r := reply.(type) {
	case *pb.RangeResponse:
		if q, ok := req.(*pb.RangeRequest); ok && !q.Serializable {
			return r.Header
		}
	case *pb.PutResponse:
		return r.Header
	case *pb.DeleteRangeResponse:
		return r.Header
	case *pb.TxnResponse:
		if q, ok := req.(*pb.TxnRequest); ok && !serializableTxn(q) {
			return r.Header
		}
	}
	return nil
}

// serializableTxn reports whether etcd may answer q from a member that lags:
// it only reads, serializably, as etcd decides it.
func serializableTxn(q *pb.TxnRequest) bool {
	for _, op := range append(q.Success, q.Failure...) {
		switch r := op.Request.(type) {
		case *pb.RequestOp_RequestRange:
			if !r.RequestRange.Serializable {
				return false
			}
		case *pb.RequestOp_RequestTxn:
			if !serializableTxn(r.RequestTxn) {
				return false
			}
		default:
			return false
		}
	}
	return true
}
