// Package shard maps every slot (a job partition) to its preferred owner
// among the members of a view.
//
// The map is a consistent-hash ring with bounded loads
// (github.com/buraksezer/consistent, hashed with xxhash): slots hash onto a
// fixed number of ring partitions, and ring partitions are spread over the
// members so that none holds more than LoadFactor times the average. When a
// member joins or leaves, only about 1/N of the slots change owner.
//
// The ring is a pure function of the sorted member ids: every member that
// computes it for the same view gets the same owner for every slot. It does
// not decide who leads a slot (the slot's election does, and keeps it safe
// while members' views disagree); it decides who campaigns for it.
//
// buraksezer/consistent panics when its partitions cannot be spread within the
// load bound, which happens exactly when there are more members than ring
// partitions. New refuses such a view with ErrTooManyMembers instead.
package shard
