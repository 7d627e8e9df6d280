package ops

import (
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong with a cluster that an operator must act on:
// what is wrong and what to do, in one sentence a page shows as is.
type Problem struct {
	// Kind is leaderless, catalog_revision, unplaced, etcd_alarm,
	// two_leaders or members_unread.
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// maxNamed bounds how many slots or members one problem names.
const maxNamed = 10

// Health is what is wrong in st: slots of the catalog nobody leads (but
// for those of jobs placed on no member, said once per job), members
// running another catalog revision than the stored one, jobs whose
// placement matches no member. Two leaders of one slot cannot be seen
// here, since etcd's election has one leader by construction: TwoLeaders
// reads them from the members. TestHealthNamesWhatToDo.
func Health(st *Status) []Problem {
	out := []Problem{}
	var leaderless []string
	for _, s := range st.Slots {
		if s.Owner == "" && !slices.Contains(st.Unplaced, s.Job) { // an unplaced job's slots are its own line
			leaderless = append(leaderless, fmt.Sprintf("%s/%d", s.Job, s.Partition))
		}
	}
	if len(leaderless) > 0 && len(st.Members) > 0 {
		out = append(out, Problem{Kind: "leaderless", Message: fmt.Sprintf(
			"%d slot(s) without a leader (%s): their fires wait. The member the split gives them is not campaigning: find it with kira status, read its log, and restart it (or stop it: its lease then expires and the others take its slots).",
			len(leaderless), named(leaderless))})
	} else if len(leaderless) > 0 {
		out = append(out, Problem{Kind: "leaderless", Message: fmt.Sprintf(
			"%d slot(s) without a leader and no member running: nothing fires. Start kira run on at least one machine.", len(leaderless))})
	}
	var behind []string
	for _, m := range st.Members {
		if st.CatalogRevision > 0 && m.CatalogRevision != st.CatalogRevision {
			behind = append(behind, fmt.Sprintf("%s runs %d", nameOf(m.Name, m.ID), m.CatalogRevision))
		}
	}
	if len(behind) > 0 {
		out = append(out, Problem{Kind: "catalog_revision", Message: fmt.Sprintf(
			"members on another catalog revision than the stored %d (%s): they cannot run the stored catalog. Read their log (\"cannot run the new catalog\"), then upgrade or restart them, or kira apply a catalog they can run.",
			st.CatalogRevision, named(behind))})
	}
	for _, j := range st.Unplaced {
		out = append(out, Problem{Kind: "unplaced", Message: fmt.Sprintf(
			"job %s is placed on no member: no member has the labels its placement asks for, so it never runs. Start a member with those labels (kira run --label) or change the job's placement.", j)})
	}
	return out
}

func nameOf(name, id string) string {
	if name != "" {
		return name
	}
	return id
}

// named lists up to maxNamed of names, saying how many more there are.
func named(names []string) string {
	if len(names) <= maxNamed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxNamed], ", "), len(names)-maxNamed)
}

// AlarmProblems are the alarms etcd has raised (etcdserverpb.AlarmType
// names: NOSPACE, CORRUPT), each with what to do. etcd refuses every write
// while one is raised, so no execution starts. TestHealthNamesWhatToDo.
func AlarmProblems(alarms []string) []Problem {
	out := []Problem{}
	for _, a := range alarms {
		msg := fmt.Sprintf("etcd raised the %s alarm: it refuses every write, so no execution starts. ", a)
		switch a {
		case "NOSPACE":
			msg += "Free space: compact and defragment etcd (etcdctl compact, etcdctl defrag) or the filesystem under its data directory, then etcdctl alarm disarm (kira etcd and the embedded etcd disarm it themselves once space is freed)."
		case "CORRUPT":
			msg += "A member's data differs from the others': stop that etcd member, restore it from a snapshot or remove and re-add it (see etcd's recovery guide), then etcdctl alarm disarm."
		default:
			msg += "Read etcd's log, fix the cause, then etcdctl alarm disarm."
		}
		out = append(out, Problem{Kind: "etcd_alarm", Message: msg})
	}
	return out
}
