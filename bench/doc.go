// Package bench measures Kira as a scheduler: how fast a slot changes hands,
// how late fires start, how many slots move when members come and go. It
// prints figures; it asserts nothing (machines are shared and noisy).
//
// Every scenario runs real members (membership, views, scheduler, each with
// its own etcd client) against a real embedded etcd, inside this process. A
// crash is simulated by closing a member's etcd connection without revoking
// its lease, so etcd expires the lease after its TTL exactly as it would for
// a killed process; a graceful stop is the same path as SIGTERM in kira run
// (stop firing, revoke the lease).
package bench
