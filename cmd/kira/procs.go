package main

import "runtime"

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
