package kiratest

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPollAndReceive(t *testing.T) {
	n := 0
	if !Poll(time.Second, func() bool { n++; return n == 3 }) {
		t.Fatal("Poll gave up on a condition that held on its third check")
	}
	if Poll(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll reported a condition that never held")
	}
	ch := make(chan int, 1)
	ch <- 7
	if v := Receive(t, ch, time.Second, "a value"); v != 7 {
		t.Fatalf("Receive = %d, want 7", v)
	}
}
