// Package bench measures Kira as a scheduler: how fast a slot changes hands,
// how late fires start, how many slots move when members come and go, and
// what etcd pays. It prints figures; it asserts nothing (machines are shared
// and noisy).
//
// By default the members run inside this process (member.go), each with its
// own etcd client, against an etcd the bench embeds or is given. A crash is
// simulated by closing a member's etcd connection without revoking its
// lease, so etcd expires the lease after its TTL exactly as it would for a
// killed process; a graceful stop is the same path as SIGTERM in kira run
// (stop firing, revoke the lease). failover.go, lateness.go and
// rebalance.go measure that shape.
//
// The production shape runs everything as processes of the bench's binary:
// three kira etcd as one cluster and kira run members (production.go for
// the cluster, lateness and what etcd paid, read from its /metrics and
// /proc; procs.go for failover and handover; procrebalance.go; soak.go).
// report.go is what both shapes report.
package bench
