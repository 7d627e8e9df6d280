// Package member owns a process's presence in a Kira cluster: its
// identity, its lease, its member record, and the views of the member set.
//
// Identity. A member id is the hostname plus a UUID made when the process
// starts (NewID), never the hostname alone: a restarted process is a new
// member, and its old leadership cannot be mistaken for its new.
//
// Lease. Join grants one etcd lease per process and wraps it in one
// concurrency.Session, built over a client whose KeepAlive is the member's
// own renewals every TTL/3, so a lease lasts at least three renewal
// intervals. (etcd's client sends due keepalives on a 500 ms poll: every 1 s
// at TTL 2 s, two intervals a lease.) The member record (members/<id>) and every election key
// the member writes are attached to that lease: when it expires or is revoked,
// all of them vanish in one etcd revision.
//
// Trust window. A member may act on its leadership only while it can prove
// its lease is alive: Deadline is the time the last acknowledged renewal was
// sent plus the TTL, minus a safety margin, measured on the monotonic clock.
// etcd renewed the lease after the send, so send+TTL never overestimates the
// server's expiry; the margin absorbs clocks that run at different rates.
// Past the deadline the member starts nothing, whatever its goroutines believe.
//
// Views. Views watches the member records and publishes the member set
// stamped with the etcd revision it was read at. Two members that have seen
// the same revision have the same view, which is what makes the assignment
// of slots (package shard) agree across members. Consumers are signalled, never
// blocked on: a slow consumer skips intermediate views and reads the latest.
package member
