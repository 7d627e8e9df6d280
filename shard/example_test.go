package shard_test

import (
	"fmt"

	"github.com/kira-scheduler/kira/shard"
)

func ExampleRing_Owner() {
	view := []string{"host-a-1b2c", "host-b-3d4e", "host-c-5f60"}
	r, _ := shard.New(view)
	// Any member that computes the ring for the same view gets the same owner.
	again, _ := shard.New([]string{"host-c-5f60", "host-a-1b2c", "host-b-3d4e"})
	s := shard.Slot{Job: "reconcile", Partition: 7}
	fmt.Println(r.Owner(s) == again.Owner(s))
	// Output: true
}
