// Package fencing defines the fencing token and how it travels with an
// execution: in its context, in the KIRA_FENCING_TOKEN environment variable
// of a command and in the Kira-Fencing-Token header of an HTTP request.
//
// A token is the etcd create revision of a slot's election leader key. etcd
// revisions rise with every write to the cluster, and a new holder of a slot
// always creates a new leader key, so the token of a slot strictly rises with
// every change of holder and never changes while one holder keeps it (lease
// renewal does not touch the key). That is what lets a protected resource
// reject the late write of a paused or partitioned ex-leader: it remembers the
// highest token it has accepted and refuses anything lower. Safety rests on
// revisions, never on comparing members' clocks.
//
// Guards make a protected resource check the token:
//
//   - EtcdGuard (here): a write to etcd commits only if the slot's leader key
//     still exists with the claim's token as its create revision, in one
//     transaction.
//   - pgfence: PostgreSQL fenced upserts (row fence) and a per-slot fence row
//     (slot fence), each with a Raise for the new leader to run on acquire.
//   - httpfence: net/http middleware that keeps the highest token per
//     resource and answers 409 Conflict to older ones; the tokens live in
//     memory, or in etcd (httpfence.EtcdStore) or PostgreSQL (pgfence.Store)
//     shared by a service's replicas.
//
// Every guard reports a refused write as ErrFenced.
package fencing
