package shard

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// Job is what the assignment needs of a catalog job: its name, its number
// of slots, and the ids of the members its placement admits (in any order).
type Job struct {
	Name       string
	Partitions int
	Members    []string
}

// Assignment is the preferred owner of every slot of a catalog in one view.
// Place and Remove change it in place: it is not shared while they run.
type Assignment struct {
	owners map[string][]string
}

// Assign computes the preferred owner of every slot of jobs. It is a pure
// function of its input: job order, member order and duplicate member ids
// do not change the answer. Two jobs of one name, or a negative partition
// count, are an error.
func Assign(jobs []Job) (*Assignment, error) {
	js, err := normalize(jobs)
	if err != nil {
		return nil, err
	}
	a := &Assignment{owners: make(map[string][]string, len(js))}
	members := index(js)
	slots := 0
	for _, j := range js {
		a.owners[j.name] = make([]string, j.partitions)
		if len(j.members) > 0 {
			slots += j.partitions
		}
	}
	limit := 0 // a member takes leftovers while its total is at most the average
	if members > 0 {
		limit = slots/members + 1
	}
	place(js, a.owners, members, limit)
	return a, nil
}

// Owner returns the member preferred for s, or "" when s is not a slot of
// the assignment or no member may run its job.
func (a *Assignment) Owner(s Slot) string {
	o := a.owners[s.Job]
	if s.Partition < 0 || s.Partition >= len(o) {
		return ""
	}
	return o[s.Partition]
}

// Shares returns how many slots of job each member is preferred for.
func (a *Assignment) Shares(job string) map[string]int {
	out := map[string]int{}
	for _, o := range a.owners[job] {
		if o != "" {
			out[o]++
		}
	}
	return out
}

// Totals returns how many slots of all jobs each member is preferred for.
func (a *Assignment) Totals() map[string]int {
	out := map[string]int{}
	for job := range a.owners {
		for m, n := range a.Shares(job) {
			out[m] += n
		}
	}
	return out
}

type candidate struct {
	id   string
	hash uint64
	at   int // index in the sorted ids of every job's members
}

type normalJob struct {
	name       string
	hash       uint64
	partitions int
	members    []candidate // sorted by id, no duplicates
}

func normalize(jobs []Job) ([]normalJob, error) {
	out := make([]normalJob, 0, len(jobs))
	for _, j := range jobs {
		if j.Partitions < 0 {
			return nil, fmt.Errorf("shard: job %s has %d partitions", j.Name, j.Partitions)
		}
		ids := slices.Clone(j.Members)
		slices.Sort(ids)
		ids = slices.Compact(ids)
		ms := make([]candidate, len(ids))
		for i, id := range ids {
			ms[i] = candidate{id: id, hash: xxhash.Sum64String(id)}
		}
		out = append(out, normalJob{name: j.Name, hash: xxhash.Sum64String(j.Name), partitions: j.Partitions, members: ms})
	}
	slices.SortFunc(out, func(a, b normalJob) int { return cmp.Compare(a.name, b.name) })
	for i := 1; i < len(out); i++ {
		if out[i].name == out[i-1].name {
			return nil, fmt.Errorf("shard: job %s appears twice", out[i].name)
		}
	}
	return out, nil
}

// index numbers the members of all jobs in id order and returns how many
// there are.
func index(js []normalJob) int {
	var ids []string
	for _, j := range js {
		for _, m := range j.members {
			ids = append(ids, m.id)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for _, j := range js {
		for i := range j.members {
			j.members[i].at, _ = slices.BinarySearch(ids, j.members[i].id)
		}
	}
	return len(ids)
}

// slotKey is the hash of a job's k-th slot, from the job's name hash.
func slotKey(job uint64, k int) uint64 { return mix(job ^ (uint64(k)+1)*0x9e3779b97f4a7c15) }

// score is how much the slot of key prefers member m: rendezvous hashing.
func score(key uint64, m candidate) uint64 { return mix(key ^ m.hash) }

// mix is the 64-bit finalizer of MurmurHash3: every input bit flips about
// half the output bits.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
