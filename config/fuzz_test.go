package config

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// FuzzParse: whatever the bytes, Parse returns a catalog or located
// problems, never panics; a catalog it accepts is within every limit and
// survives being stored and read back.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"../examples/catalog.yaml", "../examples/fenced-sql/catalog.yaml", "../examples/fenced-http/catalog.yaml"} {
		if data, err := os.ReadFile(seed); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("jobs:\n  - {name: a, schedule: \"@every 1s\", command: [\"true\"], env: {A: \"${B}\"}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cat, _, err := Lint("f.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("an error that does not name the file: %v", err)
			}
			return
		}
		if len(cat.Jobs) == 0 || len(cat.Jobs) > MaxJobs || len(cat.Cluster) > MaxNameLength {
			t.Fatalf("accepted a catalog out of limits: %d jobs, cluster %q", len(cat.Jobs), cat.Cluster)
		}
		for _, j := range cat.Jobs {
			if j.Partitions < 1 || j.Partitions > MaxPartitions || !namePattern.MatchString(j.Name) {
				t.Fatalf("accepted job %+v", j)
			}
			if _, err := j.ParsedSchedule(); err != nil {
				t.Fatalf("accepted a schedule it cannot parse: %v", err)
			}
		}
		stored, err := json.Marshal(cat)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeStored(stored); err != nil {
			t.Fatalf("a catalog Parse accepted cannot be read back once stored: %v", err)
		}
	})
}

// FuzzDecodeStored: any value under the catalog key (corrupt, hand-written,
// a newer version's) is read or refused with ErrUnreadableCatalog.
func FuzzDecodeStored(f *testing.F) {
	f.Add([]byte(`{"cluster":"c","membership":{"lease_ttl":6000000000},"jobs":[{"name":"a","schedule":"@every 1s","partitions":1}]}`))
	f.Add([]byte(`{"cluster":"c","jobs":[{"name":"a","placement":{}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cat, err := decodeStored(data)
		if err == nil && (cat.Cluster == "" || len(cat.Jobs) == 0) {
			t.Fatalf("read an empty catalog from %q", data)
		}
	})
}

// FuzzExpand: a reference is expanded, or refused with a message; the
// references found are exactly the names looked up.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"plain", "Bearer ${TOKEN}", "$$", "${A}${B_2}", "${", "$x", "${1}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var looked []string
		out, err := Expand(s, func(name string) (string, bool) { looked = append(looked, name); return "v", true })
		names, rerr := References(s)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("Expand and References disagree on %q: %v, %v", s, err, rerr)
		}
		if err != nil {
			return
		}
		if strings.Join(names, ",") != strings.Join(looked, ",") {
			t.Fatalf("%q: references %v, looked up %v", s, names, looked)
		}
		if !strings.Contains(s, "$") && out != s {
			t.Fatalf("%q changed to %q without a reference", s, out)
		}
	})
}
