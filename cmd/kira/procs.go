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

// gcPercent is the garbage collector's target (GOGC) for kira run and kira
// bench, unless the GOGC environment variable sets it: between collections
// the heap may grow to 3 × what is live, not the runtime's 2 ×. A second's
// fires are woken at one instant, and a collection marking then slows their
// start (allocations assist the marker, which takes a processor too); with
// the live heap of a member and its embedded etcd small, the runtime's
// default collects about every 0.5 s at 10,000 slots firing every second,
// so most instants met one. kira bench on the 2-core development machine,
// 10,000 slots, in turn: p99 25.3 / 27.5 / 34.1 / 87.3 ms with 200, against
// 88.8 / 98.6 / 117.0 / 134.8 ms with 100; 1,000 sh slots spread over the
// second (--sh --jitter 1s): p99 5.8 / 6.3 ms against 7.7 / 10.8 ms.
const gcPercent = 200

// schedulerGCPercent is the GOGC for kira run and kira bench: gcPercent, or
// what env (GOGC) says, which the runtime has already applied (ok false).
func schedulerGCPercent(env string) (percent int, ok bool) {
	if env != "" {
		return 0, false
	}
	return gcPercent, true
}

// useSchedulerGC sets the garbage collector's target for a command that runs
// schedulers.
func useSchedulerGC(env string) {
	if percent, ok := schedulerGCPercent(env); ok {
		debug.SetGCPercent(percent)
	}
}
