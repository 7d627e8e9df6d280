package ops

import (
	"reflect"
	"testing"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/member"
)

// A job's shares list every member its placement admits, one leading
// nothing too, then an owner that is no member any more; largest first.
func TestJobSharesListAdmittedMembersAndOtherOwners(t *testing.T) {
	st := &Status{
		Members: []member.Record{
			{ID: "id-a", Name: "a", Labels: map[string]string{"gpu": "true"}},
			{ID: "id-b", Name: "b", Labels: map[string]string{"gpu": "true"}},
			{ID: "id-c", Name: "c"},
			{ID: "id-d", Labels: map[string]string{"gpu": "true"}},
		},
		Slots: []SlotStatus{
			{Job: "train", Partition: 0, Owner: "id-a"}, {Job: "train", Partition: 1, Owner: "id-gone"},
			{Job: "train", Partition: 2, Owner: "id-a"}, {Job: "train", Partition: 3, Owner: "id-d"},
			{Job: "train", Partition: 4}, {Job: "other", Partition: 0, Owner: "id-b"},
		},
	}
	j := config.Job{Name: "train", Partitions: 5, Placement: &config.Placement{Labels: map[string]string{"gpu": "true"}}}
	got := jobShares(st, j)
	want := []Share{{Member: "id-a", Name: "a", Slots: 2}, {Member: "id-d", Slots: 1}, {Member: "id-gone", Slots: 1}, {Member: "id-b", Name: "b"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("shares %+v, want %+v", got, want)
	}
	if s := FormatShares(got); s != "a 2, id-d 1, id-gone 1, b 0" {
		t.Fatalf("FormatShares = %q", s)
	}
}
