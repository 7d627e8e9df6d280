package main

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchPlotWritesCharts runs two tiny benches in the production shape
// with --plot: the lateness and failover run writes lateness.svg and
// failover.svg, each well-formed SVG holding its series (their legend
// names) drawn as paths, and no soak chart; the soak writes soak.svg with
// the database and every member's memory.
func TestBenchPlotWritesCharts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three kira etcd and three kira run processes twice")
	}
	dir := filepath.Join(t.TempDir(), "charts")
	benchPlot(t, "--production", "--slots", "30,60", "--jitter", "1s", "--duration", "3s", "--warmup", "1s",
		"--ttls", "2s", "--trials", "1", "--rebalance", "0", "--plot", dir)
	checkSVG(t, filepath.Join(dir, "lateness.svg"), "p50, go-handler, spread over 1s", "p99, go-handler, spread over 1s", "Fires started")
	checkSVG(t, filepath.Join(dir, "failover.svg"), "crash, lease TTL 2s", "graceful handover (SIGTERM)")
	if _, err := os.Stat(filepath.Join(dir, "soak.svg")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("soak.svg after a run without a soak: %v", err)
	}
	benchPlot(t, "--soak", "8s", "--slots", "30", "--soak-every", "2s", "--warmup", "1s", "--plot", dir)
	checkSVG(t, filepath.Join(dir, "soak.svg"), "database file", "in use", "member 1", "member 3")
}

// benchPlot runs kira bench with args, at most 5 minutes.
func benchPlot(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, kiraBin, append([]string{"bench"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kira bench %v: %v\n%s", args, err, out)
	}
	if !strings.Contains(string(out), "bench: wrote ") {
		t.Fatalf("kira bench %v names no chart written:\n%s", args, out)
	}
}

// checkSVG parses path as XML: an <svg> root, the legend's names among its
// texts, and at least as many coloured marks (paths stroked or filled in a
// colour, not the axes' black, the background's white or the grid's grey)
// as names: the series drawn.
func checkSVG(t *testing.T, path string, names ...string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	var root string
	var texts []string
	marks, inText := 0, false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			if tok.Name.Local == "path" && coloured(tok) {
				marks++
			}
			inText = tok.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, string(tok))
			}
		case xml.EndElement:
			inText = false
		}
	}
	all := strings.Join(texts, "\n")
	for _, n := range names {
		if !strings.Contains(all, n) {
			t.Errorf("%s has no text %q; its texts:\n%s", path, n, all)
		}
	}
	if root != "svg" || marks < len(names) {
		t.Fatalf("%s: root <%s>, %d coloured marks; want an <svg> with its %d series drawn", path, root, marks, len(names))
	}
}

// coloured says whether a path's style strokes or fills it in a colour
// whose red, green and blue differ (not black, white or grey).
func coloured(el xml.StartElement) bool {
	for _, a := range el.Attr {
		if a.Name.Local != "style" {
			continue
		}
		for _, decl := range strings.Split(a.Value, ";") {
			_, c, ok := strings.Cut(decl, ":#")
			if ok && len(c) == 6 && !(c[0:2] == c[2:4] && c[2:4] == c[4:6]) {
				return true
			}
		}
	}
	return false
}
