// Package jobs runs executions: a command (its own process group, killed on
// timeout or loss of leadership), an HTTP request (2xx is success), or an
// in-process Go handler.
//
// Every execution carries the same facts, whatever runs it: the job, the
// partition and partition count, the slot's fencing token, the member, the
// scheduled time and a deterministic execution id derived from job, partition
// and scheduled time, so a retry of the same fire, on any member, has the same
// idempotency key. Commands get them as KIRA_* environment variables, HTTP
// requests as Kira-* headers plus Idempotency-Key, and Go handlers from their
// context (FromContext, fencing.FromContext).
//
// Executors do not decide whether to run: the scheduler does, and cancels the
// context it passes when the slot is lost or the timeout passes. An executor's
// only duty is to stop promptly when that context ends and to say how the run
// ended.
package jobs
