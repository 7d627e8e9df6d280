// Package pgfence makes PostgreSQL writes fail for a paused or partitioned
// ex-leader, with two tools.
//
// Table (row fence): every protected row carries the token of its last
// writer in a fence_token column. Upsert turns a write into
//
//	INSERT ... ON CONFLICT (key) DO UPDATE SET ... WHERE t.fence_token <= EXCLUDED.fence_token
//
// so that "0 rows affected" means only "fenced" (a missing row is inserted,
// never reported as 0), and Upsert returns fencing.ErrFenced. Raise is the
// fence raised on acquire: UPDATE t SET fence_token = $new WHERE fence_token < $new,
// run by the new leader before its first execution, so the ex-leader cannot
// slip a write into existing rows between the acquisition and the new
// leader's first write. A row fence cannot protect a key that has no row yet.
//
// Fence (slot fence): one row per slot in a small table (kira_fences) holds
// the highest token raised for the slot. Do runs the caller's writes in a
// transaction that first takes a FOR SHARE lock on the slot's fence row and
// checks the token, so it covers any SQL, including rows that do not exist
// yet. Raise (on acquire) updates that row, and must wait for every
// transaction still holding the share lock: once Raise has returned, no
// transaction with an older token can commit.
//
// Store keeps httpfence's tokens in PostgreSQL, so that the replicas of an
// HTTP service are fenced as one.
package pgfence
