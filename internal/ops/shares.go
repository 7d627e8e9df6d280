package ops

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/member"
)

// Share is how many of one job's slots a member leads. A member the job's
// placement admits is listed even when it leads none.
type Share struct {
	Member string `json:"member"` // the member's id
	Name   string `json:"name"`   // its --name, or "" if it gave none
	Slots  int    `json:"slots"`
}

// jobShares lists, for job j, each admitted member's share of its slots in
// st, then any other owner's (a member gone, or not admitted any more),
// largest first, then by name and id.
func jobShares(st *Status, j config.Job) []Share {
	byID := map[string]*Share{}
	out := []Share{}
	for _, m := range st.Members {
		if member.Matches(m.Labels, j.Selector()) {
			byID[m.ID] = &Share{Member: m.ID, Name: m.Name}
		}
	}
	names := map[string]string{}
	for _, m := range st.Members {
		names[m.ID] = m.Name
	}
	for _, s := range st.Slots {
		if s.Job != j.Name || s.Owner == "" {
			continue
		}
		if byID[s.Owner] == nil {
			byID[s.Owner] = &Share{Member: s.Owner, Name: names[s.Owner]}
		}
		byID[s.Owner].Slots++
	}
	for _, s := range byID {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Share) int {
		return cmp.Or(cmp.Compare(b.Slots, a.Slots), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Member, b.Member))
	})
	return out
}

// FormatShares renders shares as "name 4, name 4, name 4" (a member
// without a name by its id).
func FormatShares(shares []Share) string {
	parts := make([]string, len(shares))
	for i, s := range shares {
		who := s.Name
		if who == "" {
			who = s.Member
		}
		parts[i] = who + " " + strconv.Itoa(s.Slots)
	}
	return strings.Join(parts, ", ")
}
