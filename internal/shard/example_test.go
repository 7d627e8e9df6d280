package shard_test

import (
	"fmt"

	"github.com/kira-scheduler/kira/internal/shard"
)

func ExampleAssign() {
	view := []string{"host-a-1b2c", "host-b-3d4e", "host-c-5f60"}
	a, _ := shard.Assign([]shard.Job{{Name: "reconcile", Partitions: 12, Members: view}})
	shares := a.Shares("reconcile")
	fmt.Println(shares["host-a-1b2c"], shares["host-b-3d4e"], shares["host-c-5f60"])
	// Any member that computes it for the same view gets the same owners.
	again, _ := shard.Assign([]shard.Job{{Name: "reconcile", Partitions: 12, Members: []string{"host-c-5f60", "host-a-1b2c", "host-b-3d4e"}}})
	s := shard.Slot{Job: "reconcile", Partition: 7}
	fmt.Println(a.Owner(s) == again.Owner(s))
	// Output:
	// 4 4 4
	// true
}
