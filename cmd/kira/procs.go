package main

import (
	"runtime"
	"runtime/debug"
)

// extraProcs is how many Go processors (GOMAXPROCS) kira run and kira bench
// use beyond the runtime's default, the CPUs the process may use, unless the
// GOMAXPROCS environment variable sets them. A second's fires are woken at
// one instant, and a member shares its processors with etcd's apply, gRPC
// and GC (and a fork holds its processor until the child has exec'd); with
// two more processors than cores the operating system's finer time slicing
// shares the cores among them. kira bench on the 2-core development machine,
// 1,000 slots: p50 2.23 / 2.32 / 2.44 / 2.40 ms and p99 4.4–5.2 ms with
// GOMAXPROCS=4, against 2.66 / 3.42 / 2.49 ms and 5.9–6.6 ms with 2.
const extraProcs = 2

// schedulerProcs is the GOMAXPROCS for kira run and kira bench: current (the
// runtime's) plus extraProcs, or current when env (GOMAXPROCS) is set.
func schedulerProcs(env string, current int) int {
	if env != "" {
		return current
	}
	return current + extraProcs
}

// useSchedulerProcs sets GOMAXPROCS for a command that runs schedulers.
// Setting it stops the runtime from following later changes of the CPU
// limit (Go 1.25's container-aware default): a member restarted after such
// a change picks it up.
func useSchedulerProcs(env string) {
	runtime.GOMAXPROCS(schedulerProcs(env, runtime.GOMAXPROCS(0)))
}

// gcPercent is the garbage collector's target (GOGC) for a kira run or kira
// bench process that hosts an embedded etcd, unless the GOGC environment
// variable sets it: between collections the heap may grow to 3 × what is
// live, not the runtime's 2 ×. etcd's apply and gRPC allocate most of such a
// process's bytes, and a second's fires are woken at one instant; a
// collection marking then slows their start (allocations assist the marker,
// which takes a processor too). At 10,000 slots firing every second the
// runtime's default collected every 0.3–0.45 s (GODEBUG=gctrace=1, 2 runs),
// so most instants met a collection; before 5060419 the raft entries etcd
// kept in memory made the heap larger and collections rarer (about 1 s).
// kira bench on the 2-core development machine, 10,000 slots, in turn: p99
// 25.3 / 27.5 / 34.1 / 87.3 ms with 200, against 88.8 / 98.6 / 117.0 / 134.8
// ms with 100; 1,000 sh slots spread over the second (--sh --jitter 1s): p99
// 5.8 / 6.3 ms against 7.7 / 10.8 ms. A member alone (etcd elsewhere) keeps
// the runtime's default: it allocates far less, and the higher target cost
// it resident memory (kira bench --etcd, 10,000 idle slots, once free memory
// is returned: 2.26 MiB per 1,000 slots per member against 1.89 / 1.95).
const gcPercent = 200

// hostingEtcdGCPercent is the GOGC for a process that hosts an embedded
// etcd: gcPercent, or what env (GOGC) says, which the runtime has already
// applied (ok false).
func hostingEtcdGCPercent(env string) (percent int, ok bool) {
	if env != "" {
		return 0, false
	}
	return gcPercent, true
}

// useHostingEtcdGC sets the garbage collector's target once a kira run or
// kira bench process has started an embedded etcd.
func useHostingEtcdGC(env string) {
	if percent, ok := hostingEtcdGCPercent(env); ok {
		debug.SetGCPercent(percent)
	}
}
