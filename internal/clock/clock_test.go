package clock

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// An Offset clock reads ahead of its base, and its timers fire when the offset
// clock reaches the time they were set for, not when the base does.
func TestOffsetClock(t *testing.T) {
	base := NewManual(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	c := Offset{Base: base, Offset: 30 * time.Second}
	if got, want := c.Now(), base.Now().Add(30*time.Second); !got.Equal(want) {
		t.Fatalf("Now = %v; want %v", got, want)
	}
	timer := c.NewTimer(time.Hour)
	timer.ResetAt(c.Now().Add(5 * time.Second))
	base.Advance(4 * time.Second)
	select {
	case <-timer.C():
		t.Fatal("fired 1s early")
	default:
	}
	base.Advance(time.Second)
	select {
	case <-timer.C():
	default:
		t.Fatal("did not fire when the offset clock reached its time")
	}
}
