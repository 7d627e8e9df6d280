// Package kiratest is what Kira's tests share besides a real etcd (etcdtest):
// waiting for a condition with a deadline and receiving with a timeout, so
// that no test sleeps to synchronise or blocks forever on a bare receive.
package kiratest

import (
	"testing"
	"time"
)

// PollEvery is how often Poll and WaitUntil check their condition.
const PollEvery = 20 * time.Millisecond

// Poll checks cond every PollEvery until it holds (true) or within has
// passed (false).
func Poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(PollEvery)
	}
	return true
}

// WaitUntil fails the test unless cond holds within the given time; what
// says what was awaited.
func WaitUntil(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	if !Poll(within, cond) {
		t.Fatalf("timed out after %s waiting for %s", within, what)
	}
}

// Receive returns the next value from ch, or fails the test if none comes
// within the given time. A closed channel yields T's zero value at once, as
// a plain receive would.
func Receive[T any](t testing.TB, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %s waiting for %s", within, what)
		var zero T
		return zero
	}
}
