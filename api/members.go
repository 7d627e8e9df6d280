package api

import (
	"context"
	"net/http"
	"time"

	"github.com/kira-scheduler/kira/operator"
)

// members answers each live member with its slots and lease.
func (s *server) members(ctx context.Context, _ *http.Request) (any, error) {
	st, err := operator.ReadStatus(ctx, s.cfg.KV, s.cfg.Cluster)
	if err != nil {
		return nil, err
	}
	return operator.ReadMembers(ctx, s.cfg.KV, s.cfg.Leases, st, time.Now())
}
