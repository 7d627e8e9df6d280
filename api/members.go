package api

import (
	"context"
	"net/http"
	"time"

	"github.com/kira-scheduler/kira/internal/ops"
)

// members answers each live member with its slots, its lease and its
// part in the last failover.
func (s *server) members(ctx context.Context, _ *http.Request) (any, error) {
	st, err := ops.ReadStatusCached(ctx, s.cfg.KV, s.cfg.Cluster, &s.catalogs)
	if err != nil {
		return nil, err
	}
	members, err := ops.ReadMembers(ctx, s.cfg.KV, s.cfg.Leases, st, time.Now())
	if err != nil {
		return nil, err
	}
	recs, err := s.rings.Records(ctx, s.journals)
	if err != nil {
		return nil, err
	}
	ops.AddLastFailover(members, recs)
	return members, nil
}
