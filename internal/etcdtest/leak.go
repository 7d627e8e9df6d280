package etcdtest

import "go.uber.org/goleak"

// IgnoredGoroutines lists goroutines that embedded etcd and its libraries
// leave running after Close by design (process-wide singletons), for
// goleak.VerifyTestMain in every package that uses etcdtest.
func IgnoredGoroutines() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreTopFunction("go.etcd.io/etcd/client/pkg/v3/logutil.(*MergeLogger).outputLoop"),
	}
}

// PeerConnectionGoroutines adds the HTTP connections between the members of a
// multi-node cluster, which etcd's peer transport (rafthttp) leaves to close
// on their own idle timeout after Close. Only packages that start clusters of
// more than one member need it; elsewhere a lingering HTTP connection is a
// real leak and must fail the test.
func PeerConnectionGoroutines() []goleak.Option {
	return append(IgnoredGoroutines(),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
	)
}
