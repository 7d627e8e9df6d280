// Package bench measures Kira as a scheduler: how fast a slot changes hands,
// how late fires start, how many slots move when members come and go, what
// idle slots cost in memory, and what etcd pays. It prints figures; it
// asserts nothing (machines are shared and noisy).
//
// Every member is a `kira run` process of the bench's binary, the shape
// users deploy; a crash is SIGKILL and a graceful stop SIGTERM. What the
// members ran is read back from etcd (the history, the election keys) and
// from their /metrics. etcd is the bench's own, embedded in its process
// (tuned as kira run tunes it, or with --etcd-fast as the tests do), one
// given with --etcd, or, in the production shape, three `kira etcd`
// processes (production.go, which also reads what the cluster paid from
// its /metrics and /proc).
//
// procs.go measures failover and handover, production.go lateness,
// procrebalance.go rebalance and memory, soak.go the soak; lateness.go has
// what etcd paid as the bench's own process counts it, and the fork floor
// (the same commands forked without a scheduler). report.go is what every
// run reports.
package bench
