// Package etcdtest starts real embedded etcd servers inside tests: a single
// node or a cluster of several members, on free loopback ports, each with its
// own data directory, all stopped by t.Cleanup.
//
// Kira's tests never mock etcd: leases really expire, elections really queue
// and revisions really rise. Faults are injected for real too: a member can be
// stopped and restarted (losing quorum in a cluster), and a client can be sent
// through a Proxy that cuts or delays its connection.
//
// Servers run with short heartbeat and election timeouts and without fsync, to
// keep tests fast; nothing else differs from a production etcd.
package etcdtest
