package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"io"
	"log/slog"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/kira-scheduler/kira/membership"
	"github.com/kira-scheduler/kira/scheduler"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// member is one in-process Kira member with its own etcd connection.
type member struct {
	id     string
	cli    *clientv3.Client
	m      *membership.Member
	sched  *scheduler.Scheduler
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// lost is closed when the scheduler stopped on its own (its lease was
	// lost or no longer trusted), with runErr saying why. kira run would
	// rejoin as a new member; the bench does not, and says so.
	lost   chan struct{}
	runErr error
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func startMember(endpoints []string, cat *config.Catalog, handlers jobs.Handlers, onEvent func(scheduler.Event)) (*member, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := membership.NewID()
	m, err := membership.Join(ctx, cli, membership.Config{Cluster: cat.Cluster, TTL: cat.Membership.LeaseTTL, Record: membership.Record{ID: id}})
	if err != nil {
		cli.Close()
		return nil, err
	}
	views := membership.NewViews(cli, cat.Cluster)
	s, err := scheduler.New(m, views, cat, scheduler.Config{Handlers: handlers, OnEvent: onEvent, Logger: quiet, Grace: 5 * time.Second})
	if err != nil {
		m.Leave(context.Background())
		cli.Close()
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.Background())
	mb := &member{id: id, cli: cli, m: m, sched: s, cancel: stop, lost: make(chan struct{})}
	mb.wg.Add(2)
	go func() { defer mb.wg.Done(); views.Run(runCtx) }()
	go func() {
		defer mb.wg.Done()
		if err := s.Run(runCtx); runCtx.Err() == nil {
			mb.runErr = err
			close(mb.lost)
		}
	}()
	return mb, nil
}

// lostMember returns an error naming the first member whose scheduler
// stopped on its own, or nil.
func lostMember(ms []*member) error {
	for _, m := range ms {
		select {
		case <-m.lost:
			return fmt.Errorf("member %s stopped scheduling: %w (kira run would rejoin as a new member; the bench does not)", m.id, m.runErr)
		default:
		}
	}
	return nil
}

// stop is a graceful stop: stop firing, drain, revoke the lease.
func (mb *member) stop() {
	mb.cancel()
	mb.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	mb.m.Leave(ctx)
	mb.cli.Close()
}

// crash drops the member's etcd connection without revoking its lease: etcd
// expires the lease after its TTL, as for a killed process. The member's own
// goroutines then wind down.
func (mb *member) crash() {
	mb.cli.Close()
	mb.cancel()
	mb.wg.Wait()
}
