// Package chaos is Kira's chaos suite: it runs three kira etcd and three
// kira run processes behind fault proxies, injects real faults (kill -9,
// SIGSTOP, partitions, a slow network, quorum loss, rolling restarts,
// scaling, clock skew and a seeded random schedule of them), and holds
// what the jobs wrote to a checker.
//
// The package's own code is what the tests judge by: Witness, a fenced
// HTTP service every job writes to, which logs each attempt with its
// member, token, execution id and outcome; and Check, which holds that log
// to the promises, per slot: no scheduled time accepted twice, accepted
// tokens never going down, every scheduled time accepted unless the job's
// misfire policy may drop it inside a fault's window, and every fire on
// time again soon after each fault heals; and, per concurrency limit, never
// more of its runs at once than it allows, each run counted from its start
// mark to its end mark at the witness (judgeConcurrency). The faults themselves live in
// the tests (faults_test.go, harness_test.go); docs/chaos.md describes
// each. The checker is held by its own tests (checker_test.go:
// TestCheckerCatchesDuplicate, TestCheckerCatchesStaleAcceptedWrite,
// TestReplaysAreJudged and the others).
package chaos
