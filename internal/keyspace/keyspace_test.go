package keyspace

import (
	"testing"

	"github.com/kira-scheduler/kira/internal/shard"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Keys that a member parses back (control keys, candidacies) round-trip,
// and anything else under the prefix, written by hand, is refused.
func TestParseReadsBackWhatItSpells(t *testing.T) {
	s := shard.Slot{Job: "report", Partition: 12}
	got, lease, ok := ParseCandidacy("c", Candidacy("c", s, 0x1f))
	if !ok || got != s || lease != "1f" {
		t.Fatalf("ParseCandidacy(Candidacy) = %v %q %v", got, lease, ok)
	}
	if ck, ok := ParseControl("c", Paused("c", "report")); !ok || ck != (ControlKey{Job: "report"}) {
		t.Fatalf("ParseControl(Paused) = %+v %v", ck, ok)
	}
	if ck, ok := ParseControl("c", Triggers("c", s)+"some-uuid"); !ok || ck != (ControlKey{Job: "report", Partition: 12, Trigger: true}) {
		t.Fatalf("ParseControl(trigger) = %+v %v", ck, ok)
	}
	for _, junk := range []string{
		Control("c"), Control("c") + "report", Control("c") + "report/paused/x", Control("c") + "/paused",
		Triggers("c", s), Control("c") + "report/trigger/x/id", Control("c") + "report/trigger/-1/id", Control("d") + "report/paused",
	} {
		if ck, ok := ParseControl("c", junk); ok {
			t.Errorf("ParseControl(%q) = %+v, want refused", junk, ck)
		}
	}
	for _, junk := range []string{Elections("c") + "report/x/1f", Elections("c") + "report/12", State("c", s)} {
		if _, _, ok := ParseCandidacy("c", junk); ok {
			t.Errorf("ParseCandidacy(%q) accepted", junk)
		}
	}
	if got, want := HistoryEntry("c", s, 205, 100), "/kira/c/history/report/12/005"; got != want {
		t.Errorf("HistoryEntry = %q, want %q", got, want)
	}
	if got, ok := ParseHistoryEntry("c", HistoryEntry("c", s, 205, 100)); !ok || got != s {
		t.Errorf("ParseHistoryEntry(HistoryEntry) = %v %v", got, ok)
	}
	for _, junk := range []string{History("c", "report"), SlotHistory("c", s), History("c", "report") + "012/005", History("d", "report") + "12/005", State("c", s)} {
		if got, ok := ParseHistoryEntry("c", junk); ok {
			t.Errorf("ParseHistoryEntry(%q) = %v, want refused", junk, got)
		}
	}
}

// FuzzParseControl: any key is refused or parsed into a control key that
// spells the same key back.
func FuzzParseControl(f *testing.F) {
	for _, k := range []string{Paused("c", "job"), Triggers("c", shard.Slot{Job: "job", Partition: 3}) + "uuid", Control("c") + "x/y/z", "/kira/c/control/"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		ck, ok := ParseControl("c", key)
		if !ok {
			return
		}
		var want string
		if ck.Trigger {
			want = Triggers("c", shard.Slot{Job: ck.Job, Partition: ck.Partition})
			if len(key) <= len(want) || key[:len(want)] != want {
				t.Fatalf("%q parsed as %+v, which spells %q...", key, ck, want)
			}
			return
		}
		if want = Paused("c", ck.Job); key != want {
			t.Fatalf("%q parsed as %+v, which spells %q", key, ck, want)
		}
	})
}

// A generation's reference keys are not jobs or settings: ParseCatalogKey
// refuses them, IsCatalogRef knows them, and no job or settings key is one.
func TestParseCatalogKeyIgnoresRefs(t *testing.T) {
	ref := CatalogRef("c", 7, "extract", "load")
	if g, job, ok := ParseCatalogKey("c", ref); ok {
		t.Errorf("ParseCatalogKey(%q) = %d %q, want refused", ref, g, job)
	}
	if !IsCatalogRef("c", ref) || !IsCatalogRef("c", CatalogRefs("c", 7, "extract")) {
		t.Errorf("IsCatalogRef(%q) is false", ref)
	}
	for _, k := range []string{CatalogJob("c", 7, "refs"), CatalogSettings("c", 7), CatalogHead("c"), CatalogChange("c")} {
		if IsCatalogRef("c", k) {
			t.Errorf("IsCatalogRef(%q) is true", k)
		}
	}
	if g, job, ok := ParseCatalogKey("c", CatalogJob("c", 7, "refs")); !ok || g != 7 || job != "refs" {
		t.Errorf("a job named refs parsed as %d %q %v", g, job, ok)
	}
}
