package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/etcdclient"
	"github.com/kira-scheduler/kira/jobs"
	kiramember "github.com/kira-scheduler/kira/member"
	"github.com/kira-scheduler/kira/scheduler"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// member is one in-process Kira member with its own etcd connection: one
// incarnation of member.Start, which kira run uses too.
type member struct {
	id    string
	cli   *clientv3.Client
	inc   *kiramember.Incarnation
	sched *scheduler.Scheduler
	// ended is set when the bench stops or crashes the member: before it, an
	// incarnation that is done stopped on its own (its lease was lost or no
	// longer trusted). kira run would rejoin as a new member; the bench does
	// not, and says so.
	ended atomic.Bool
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func startMember(etcd etcdclient.Config, cat *config.Catalog, handlers jobs.Handlers, onEvent func(scheduler.Event)) (*member, error) {
	cli, err := etcdclient.New(etcd)
	if err != nil {
		return nil, err
	}
	inc, err := kiramember.Start(context.Background(), cli, kiramember.Config{
		Etcd: etcd, Catalog: cat, Logger: quiet,
		Scheduler: scheduler.Config{Handlers: handlers, OnEvent: onEvent, Grace: 5 * time.Second},
	})
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &member{id: inc.ID(), cli: cli, inc: inc, sched: inc.Scheduler()}, nil
}

// lostMember returns an error naming the first member whose scheduler
// stopped on its own, or nil.
func lostMember(ms []*member) error {
	for _, m := range ms {
		select {
		case <-m.inc.Done():
			if !m.ended.Load() {
				return fmt.Errorf("member %s stopped scheduling: %w (kira run would rejoin as a new member; the bench does not)", m.id, m.inc.Err())
			}
		default:
		}
	}
	return nil
}

// stop is a graceful stop: stop firing, drain, revoke the lease.
func (mb *member) stop() {
	mb.ended.Store(true)
	mb.inc.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	mb.inc.Leave(ctx)
	mb.cli.Close()
}

// crash drops the member's etcd connection without revoking its lease: etcd
// expires the lease after its TTL, as for a killed process. The member's own
// goroutines then wind down.
func (mb *member) crash() {
	mb.ended.Store(true)
	mb.cli.Close()
	mb.inc.Stop()
}
