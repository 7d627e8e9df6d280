package ops

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// What the members themselves say they lead. etcd grants a slot's election
// to one key at a time, so the election keys never show two leaders; a
// member that went on believing it leads after losing its key (its lease
// expired while it could not tell) shows only in its own kira_slot_leader.
// The health banner reads that series from every member and names a slot
// two members claim. TestTwoLeadersNamesTheSlotAndWhatToDo.

// Claims are the slots each member says it leads, by slot; Unread the
// members whose /metrics could not be read (named by name or id).
type Claims struct {
	Leaders map[shard.Slot][]string
	Unread  []string
}

// ReadClaims reads kira_slot_leader from the /metrics of every member that
// serves HTTP (plain HTTP: the members' own address, as their records give
// it), at most 2 s each, all at once.
func ReadClaims(ctx context.Context, client *http.Client, members []member.Record) Claims {
	c := Claims{Leaders: map[shard.Slot][]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range members {
		if m.HTTP == "" {
			continue
		}
		wg.Go(func() {
			slots, err := memberClaims(ctx, client, "http://"+m.HTTP+"/metrics")
			mu.Lock()
			defer mu.Unlock()
			name := nameOf(m.Name, m.ID)
			if err != nil {
				c.Unread = append(c.Unread, name)
				return
			}
			for _, s := range slots {
				c.Leaders[s] = append(c.Leaders[s], name)
			}
		})
	}
	wg.Wait()
	slices.Sort(c.Unread)
	for s := range c.Leaders {
		slices.Sort(c.Leaders[s])
	}
	return c
}

// memberClaims reads the slots whose kira_slot_leader is 1 at url.
func memberClaims(ctx context.Context, client *http.Client, url string) ([]shard.Slot, error) {
	ctx, cancel := context.WithTimeout(ctx, claimsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	var out []shard.Slot
	for _, m := range families["kira_slot_leader"].GetMetric() {
		if m.GetGauge().GetValue() != 1 {
			continue
		}
		var s shard.Slot
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "kira_job":
				s.Job = l.GetValue()
			case "partition":
				s.Partition, _ = strconv.Atoi(l.GetValue())
			}
		}
		out = append(out, s)
	}
	return out, nil
}

const claimsTimeout = 2 * time.Second

// TwoLeaders is the health problem of slots more than one member claims,
// and of members whose claims could not be read.
func TwoLeaders(c Claims) []Problem {
	var two []string
	for s, names := range c.Leaders {
		if len(names) > 1 {
			two = append(two, fmt.Sprintf("%s/%d (%s)", s.Job, s.Partition, joinNames(names)))
		}
	}
	slices.Sort(two)
	out := []Problem{}
	if len(two) > 0 {
		out = append(out, Problem{Kind: "two_leaders", Message: fmt.Sprintf(
			"%d slot(s) that two members each say they lead (%s): the one that lost its election key is fenced when it writes, but its runs may still reach receivers without a fence. Find which holds the key with kira status, and restart the other.",
			len(two), named(two))})
	}
	if len(c.Unread) > 0 {
		out = append(out, Problem{Kind: "members_unread", Message: fmt.Sprintf(
			"could not read the /metrics of %s, so two leaders of one slot would not show for them: check that they serve --http on the address their member record gives, over plain HTTP.",
			named(c.Unread))})
	}
	return out
}

func joinNames(names []string) string {
	out := names[0]
	for _, n := range names[1:] {
		out += " and " + n
	}
	return out
}
