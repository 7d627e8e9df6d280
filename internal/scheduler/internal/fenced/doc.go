// Package fenced is a member's one batched writer of fenced transactions:
// every write a slot's holder makes to etcd (its state, its execution
// records, a resign) commits only while the slot's leader key still has the
// holder's token, and writes queued together share a transaction.
//
// Writer batches and orders the writes (one slot's writes commit in the
// order they were queued, up to four transactions in flight); Record and
// the journal put the records of a transaction in one key, an entry of the
// member's journal, and copy to a slot's ring the records still among its
// newest when their entry is reused or the slot changes hands. The state a
// record carries goes to its slot's state key in the same transaction,
// never to the journal (placeState): a slot's correctness state is never in
// a key the writer reuses. The contracts and the tests that hold them are
// on Write, Writer and Record.
package fenced
