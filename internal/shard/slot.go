package shard

import "strconv"

// Slot is one schedulable unit: a partition of a job. An indivisible job has
// the single slot with partition 0.
type Slot struct {
	Job       string
	Partition int
}

// String renders the slot as job/partition, the form used in etcd keys.
func (s Slot) String() string { return s.Job + "/" + strconv.Itoa(s.Partition) }
