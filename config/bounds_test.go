package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
)

// settingsOverTheLimit is a catalog whose notify default, each header
// within its bound, makes the settings over MaxTxnBytes as stored.
func settingsOverTheLimit() string {
	var b strings.Builder
	b.WriteString("cluster: c\nnotify:\n  - on: [failed]\n    webhook: https://hooks.example/x\n    headers:\n")
	for i := range 9 {
		fmt.Fprintf(&b, "      X-Pad-%d: %q\n", i, strings.Repeat("a", MaxHeaderValueBytes))
	}
	b.WriteString("jobs:\n  - {name: a, schedule: '@hourly', command: [\"true\"]}\n")
	return b.String()
}

// aliasedOverTheLimit is a catalog of 80 jobs, each within MaxTxnBytes as
// stored and the file within MaxCatalogBytes, whose stored whole is over
// MaxStoredCatalogBytes: each job's environment is one YAML alias of a
// value JSON writes six times larger ('<' as \u003c).
func aliasedOverTheLimit() string {
	var b strings.Builder
	b.WriteString("cluster: c\njobs:\n  - name: j000\n    schedule: '@hourly'\n    command: [\"true\"]\n")
	fmt.Fprintf(&b, "    env: {M: &big '%s'}\n", strings.Repeat("<", 150000))
	for i := 1; i < 80; i++ {
		fmt.Fprintf(&b, "  - {name: j%03d, schedule: '@hourly', command: [\"true\"], env: {M: *big}}\n", i)
	}
	return b.String()
}

// wholeSize is the keys and values of cat as stored, through its job
// index last, counted here apart from storedValues.
func wholeSize(cat *Catalog, last int) int {
	sets, _ := json.Marshal(settingsOf(cat))
	n := len(keyspace.CatalogSettings("c", 0)) + len(sets)
	for i, j := range cat.Jobs[:last+1] {
		v, _ := json.Marshal(storedJob{Position: int64(i+1) * positionStride, Job: j, Manager: ManagerApply})
		n += len(keyspace.CatalogJob("c", 0, j.Name)) + len(v)
	}
	return n
}

// Each bound of what is stored is checked by the validator as the store
// checks it, on the same encoding, with the same figures: the settings
// over MaxTxnBytes, the whole catalog over MaxStoredCatalogBytes (located
// at the job that takes it over), more pools than MaxPools. The store,
// given such a catalog anyway, refuses it with the validator's message and
// writes nothing.
func TestStoredBoundsAreTheValidators(t *testing.T) {
	settings := settingsOverTheLimit()
	sets, _ := json.Marshal(settingsOf(unchecked(t, []byte(settings))))
	aliased := aliasedOverTheLimit()
	whole := wholeSize(unchecked(t, []byte(aliased)), 74)
	if len(aliased) > MaxCatalogBytes || whole-wholeSize(unchecked(t, []byte(aliased)), 73) > MaxTxnBytes {
		t.Fatal("the test needs a file and jobs within their bounds")
	}
	var pools strings.Builder
	pools.WriteString("cluster: c\npools:\n")
	for i := range MaxPools + 1 {
		fmt.Fprintf(&pools, "  p%04d: 1\n", i)
	}
	pools.WriteString("jobs:\n  - {name: a, schedule: '@hourly', command: [\"true\"]}\n")
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	for _, c := range []struct{ name, yaml, want string }{
		{"settings", settings, fmt.Sprintf("large.yaml:3:3: notify: the catalog's settings (cluster, membership, notify, pools) are %d bytes as stored, over the limit of %d (etcd refuses larger requests)", len(sets), MaxTxnBytes)},
		{"whole", aliased, fmt.Sprintf("large.yaml:80:5: jobs[74]: with job j074 the catalog is %d bytes as stored (its settings and jobs, keys and values), over the limit of %d for the whole catalog", whole, MaxStoredCatalogBytes)},
		{"pools", pools.String(), fmt.Sprintf("large.yaml:3:8: pools: %d pools, over the limit of %d", MaxPools+1, MaxPools)},
	} {
		_, _, err := Lint("large.yaml", []byte(c.yaml))
		var invalid *Error
		if !errors.As(err, &invalid) || len(invalid.Problems) != 1 || invalid.Problems[0].String() != c.want {
			t.Fatalf("%s: validation said\n%v\nwant\n%s", c.name, err, c.want)
		}
		if c.name == "pools" {
			continue // the validator's alone: a catalog's pools are its settings'
		}
		cat := unchecked(t, []byte(c.yaml))
		if _, err := Apply(ctx, cli, cat, Source{By: ByApply}, false, true); err == nil || err.Error() != "config: "+invalid.Problems[0].Message {
			t.Fatalf("%s: the store said %v, the validator %q", c.name, err, invalid.Problems[0].Message)
		}
		if _, err := Read(ctx, cli, "c", 0); !errors.Is(err, ErrNoCatalog) {
			t.Fatalf("%s: a refused catalog was stored: %v", c.name, err)
		}
	}
}

// The fields of a request Kira makes are bounded as the catalog writes
// them, each refusal located at the field with its figure and limit.
func TestRequestFieldBounds(t *testing.T) {
	long := "https://x.example/" + strings.Repeat("p", MaxURLBytes)
	for _, c := range []struct{ yaml, want string }{
		{fmt.Sprintf("http: {url: %q}", long), fmt.Sprintf("b.yaml:3:50: jobs[0].http.url: the URL is %d bytes, over the limit of %d", len(long), MaxURLBytes)},
		{fmt.Sprintf("command: [\"true\"], fence_url: %q", long), fmt.Sprintf("b.yaml:3:68: jobs[0].fence_url: the URL is %d bytes, over the limit of %d", len(long), MaxURLBytes)},
		{fmt.Sprintf("command: [\"true\"], notify: [{on: [failed], webhook: %q}]", long), fmt.Sprintf("b.yaml:3:90: jobs[0].notify[0].webhook: the URL is %d bytes, over the limit of %d", len(long), MaxURLBytes)},
		{fmt.Sprintf("http: {url: \"http://x/\", headers: {X: %q}}", strings.Repeat("v", MaxHeaderValueBytes+1)), fmt.Sprintf("b.yaml:3:76: jobs[0].http.headers.X: the header's value is %d bytes, over the limit of %d", MaxHeaderValueBytes+1, MaxHeaderValueBytes)},
		{fmt.Sprintf("command: [\"true\"], notify: [{on: [failed], webhook: \"http://x/\", headers: {%s: v}}]", strings.Repeat("H", MaxHeaderNameBytes+1)), fmt.Sprintf("jobs[0].notify[0].headers.%s: the header name is %d bytes, over the limit of %d", strings.Repeat("H", MaxHeaderNameBytes+1), MaxHeaderNameBytes+1, MaxHeaderNameBytes)},
	} {
		_, err := Parse("b.yaml", []byte("cluster: c\njobs:\n  - {name: j, schedule: \"@every 1s\", "+c.yaml+"}\n"))
		var invalid *Error
		if !errors.As(err, &invalid) || len(invalid.Problems) != 1 || !strings.HasSuffix(invalid.Problems[0].String(), c.want) {
			t.Errorf("got %v\nwant %s", err, c.want)
		}
	}
	at := strings.Repeat("v", MaxHeaderValueBytes)
	if _, err := Parse("b.yaml", []byte("cluster: c\njobs:\n  - {name: j, schedule: \"@every 1s\", http: {url: \"http://x/\", headers: {X: \""+at+"\"}}}\n")); err != nil {
		t.Errorf("a header value at the limit: %v", err)
	}
}
