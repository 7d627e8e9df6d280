package main

import (
	"runtime"
	"runtime/debug"
)

// extraProcs is how many Go processors (GOMAXPROCS) kira run and kira bench
// use beyond the runtime's default, the CPUs the process may use, unless the
// GOMAXPROCS environment variable sets them. A second's fires are woken at
// one instant, a member shares its processors with etcd's apply, gRPC and
// GC, and a fork holds its processor until the child has exec'd; with two
// more processors than cores the operating system's finer time slicing
// shares the cores among them (docs/decisions/0006-gomaxprocs-cpus-plus-two.md).
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
// process's bytes, and a collection marking at an instant slows its fires
// (allocations assist the marker). A member alone (etcd elsewhere) keeps the
// runtime's default: it allocates far less, and the higher target would
// cost it resident memory (docs/decisions/0007-gogc-200-beside-an-embedded-etcd.md).
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
