// Package ops is what an operator does to a running cluster, read and
// written straight in etcd: pause, resume and trigger a job (Pause, Resume,
// RequestRun), and read the cluster's status at one revision (ReadStatus),
// its jobs (ReadJobs, ReadJob) and their history, the members' journals
// included (ReadHistoryWhere), the dashboard's timeline of executions and
// holders (ReadTimeline) and what is wrong (Health).
//
// The command line (kira status, jobs, history, pause, resume, trigger) and
// the HTTP API (package api) both go through it, so every member and every
// command answers the same from the same keys.
package ops
