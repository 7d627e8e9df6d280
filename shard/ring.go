package shard

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

// Ring parameters. Changing any of them changes every member's answer, so all
// members of a cluster must run the same values: they are constants, not options.
const (
	// RingPartitions is prime so that slot hashes spread evenly; it is large so
	// that slot counts balance well at 10,000 slots and the bound below is loose.
	RingPartitions = 7919
	// ReplicationFactor is the number of points each member has on the ring.
	// 256 rather than 64: the share of slots that move when a fourth member
	// joins three varies less (docs/benchmarks.md, "256 points per member").
	ReplicationFactor = 256
	// LoadFactor bounds a member's ring partitions to this multiple of the average.
	LoadFactor = 1.25
	// MaxMembers is the largest view a ring can spread its partitions over.
	MaxMembers = RingPartitions
)

// ErrTooManyMembers is returned when a view has more members than the ring can spread over.
var ErrTooManyMembers = errors.New("shard: more members than ring partitions")

// Slot is one schedulable unit: a partition of a job. An indivisible job has
// the single slot with partition 0.
type Slot struct {
	Job       string
	Partition int
}

// String renders the slot as job/partition, the form used in etcd keys.
func (s Slot) String() string { return s.Job + "/" + strconv.Itoa(s.Partition) }

// Ring answers which member is preferred for each slot in one view.
type Ring struct {
	members []string
	c       *consistent.Consistent
}

type member string

func (m member) String() string { return string(m) }

type hasher struct{}

func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// New builds the ring for a view's member ids. The order of ids does not
// matter; duplicates are ignored. A ring with no members owns nothing.
func New(memberIDs []string) (*Ring, error) {
	ids := slices.Clone(memberIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) > MaxMembers {
		return nil, fmt.Errorf("%w: %d members, at most %d", ErrTooManyMembers, len(ids), MaxMembers)
	}
	r := &Ring{members: ids}
	if len(ids) == 0 {
		return r, nil
	}
	ms := make([]consistent.Member, len(ids))
	for i, id := range ids {
		ms[i] = member(id)
	}
	r.c = consistent.New(ms, consistent.Config{
		Hasher:            hasher{},
		PartitionCount:    RingPartitions,
		ReplicationFactor: ReplicationFactor,
		Load:              LoadFactor,
	})
	return r, nil
}

// Members returns the sorted member ids of the ring.
func (r *Ring) Members() []string { return slices.Clone(r.members) }

// Owner returns the member preferred for s, or "" when the ring is empty.
func (r *Ring) Owner(s Slot) string {
	if r.c == nil {
		return ""
	}
	key := make([]byte, 0, len(s.Job)+12)
	key = append(key, s.Job...)
	key = append(key, '/')
	key = strconv.AppendInt(key, int64(s.Partition), 10)
	return r.c.GetPartitionOwner(r.c.FindPartitionID(key)).String()
}

// MaxLoad is the most ring partitions any member may hold in this ring.
func (r *Ring) MaxLoad() float64 {
	if r.c == nil {
		return 0
	}
	return r.c.AverageLoad()
}

// Loads returns how many ring partitions each member holds.
func (r *Ring) Loads() map[string]float64 {
	if r.c == nil {
		return map[string]float64{}
	}
	return r.c.LoadDistribution()
}
