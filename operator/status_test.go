package operator

import "testing"

func TestStatusSlotFindsBySortedJobAndPartition(t *testing.T) {
	st := &Status{Slots: []SlotStatus{
		{Job: "a", Partition: 0, Owner: "m1", Token: 5},
		{Job: "a", Partition: 2, Owner: "m2", Token: 7},
		{Job: "b", Partition: 1},
	}}
	for _, want := range st.Slots {
		if got, ok := st.Slot(want.Job, want.Partition); !ok || got != want {
			t.Errorf("Slot(%s, %d) = %+v, %v; want %+v", want.Job, want.Partition, got, ok, want)
		}
	}
	for _, absent := range []SlotStatus{{Job: "a", Partition: 1}, {Job: "b"}, {Job: "c"}, {Job: ""}} {
		if got, ok := st.Slot(absent.Job, absent.Partition); ok {
			t.Errorf("Slot(%s, %d) = %+v; want not found", absent.Job, absent.Partition, got)
		}
	}
}
