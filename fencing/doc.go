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
// Guards for protected resources (etcd transactions, SQL upserts, HTTP
// middleware) build on this package; they are not part of it yet.
package fencing
