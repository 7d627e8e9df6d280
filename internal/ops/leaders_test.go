package ops

import (
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/internal/shard"
)

// A slot two members claim is named with both and what to do; a member
// whose claims could not be read is named on a line of its own; one
// claimant each is no problem.
func TestTwoLeadersNamesTheSlotAndWhatToDo(t *testing.T) {
	one := Claims{Leaders: map[shard.Slot][]string{{Job: "a"}: {"m1"}, {Job: "a", Partition: 1}: {"m2"}}}
	if p := TwoLeaders(one); len(p) != 0 {
		t.Fatalf("one leader a slot: %+v", p)
	}
	two := Claims{Leaders: map[shard.Slot][]string{{Job: "a"}: {"m1"}, {Job: "a", Partition: 1}: {"m1", "m2"}}, Unread: []string{"m3"}}
	p := TwoLeaders(two)
	if len(p) != 2 || p[0].Kind != "two_leaders" || !strings.Contains(p[0].Message, "1 slot(s)") || !strings.Contains(p[0].Message, "a/1 (m1 and m2)") ||
		!strings.Contains(p[0].Message, "kira status") || p[1].Kind != "members_unread" || !strings.Contains(p[1].Message, "m3") {
		t.Fatalf("problems %+v", p)
	}
}
