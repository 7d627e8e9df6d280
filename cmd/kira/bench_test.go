package main

import (
	"strings"
	"testing"
)

// TestBenchRefusesWhatItCannotRun: --soak measures one rate, in the
// production shape, with the job's defaults, sampled within its length;
// --overlap is one of the catalog's policies; the soak has no command
// load; --every is whole seconds that divide the window, and every second
// with --sh; anything else is refused before a process starts, naming the
// flag.
func TestBenchRefusesWhatItCannotRun(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--soak", "1m", "--slots", "100,200"}, "--soak takes one --slots count"},
		{[]string{"--soak", "1m", "--slots", "0"}, "--soak takes one --slots count"},
		{[]string{"--soak", "10s", "--soak-every", "20s"}, "--soak-every 20s"},
		{[]string{"--soak", "1m", "--etcd", "http://127.0.0.1:1"}, "leave out --etcd"},
		{[]string{"--soak", "1m", "--overlap", "queue"}, "leave out --overlap"},
		{[]string{"--overlap", "wait"}, `--overlap "wait" is not one of skip, queue, replace, allow`},
		{[]string{"--soak", "1m", "--sh"}, "leave them out with --soak"},
		{[]string{"--soak", "1m", "--sh-probe"}, "leave them out with --soak"},
		{[]string{"--every", "1500ms"}, "--every 1.5s: want a whole number of seconds"},
		{[]string{"--every", "0s"}, "--every 0s: want a whole number of seconds"},
		{[]string{"--every", "1m", "--duration", "90s"}, "--duration 1m30s is not a whole number of --every (1m0s)"},
		{[]string{"--every", "2s", "--sh"}, "--every 2s with --sh"},
	} {
		out, code := runKira(t, append([]string{"bench"}, c.args...)...)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("kira bench %v: exit %d, %q; want an error with %q", c.args, code, out, c.want)
		}
	}
}
