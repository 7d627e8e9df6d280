// Command kira runs a sharded, replicated job scheduler on etcd.
//
//	kira run      [--catalog FILE] [--etcd URLS]   run a member (embedded etcd when no URLs)
//	kira etcd     [etcd flags]                     run a standalone embedded etcd server
//	kira status | jobs | next | catalog | history  read the cluster
//	kira apply | diff | pause | resume | trigger   change it
//	kira job get | put | delete JOB                one job, read or written alone
//	kira validate FILE                             check a catalog offline
//
// The command tree is root.go; each command's flags and body are in the
// file of its name. Every flag can also be set from a KIRA_* variable
// (env.go); docs/cli.md lists them, held by TestCLIDocListsEveryFlag.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// errUsage is returned for bad command lines; the message was already printed.
var errUsage = errors.New("usage")

// errDiffers is kira diff's answer when the file differs from the stored
// catalog: exit 1 with no further message, as kubectl diff does.
var errDiffers = errors.New("differs")

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "run" || os.Args[1] == "bench") {
		useSchedulerProcs(os.Getenv("GOMAXPROCS"))
	}
	os.Exit(runMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// runMain runs one command line: exit 0 on success (and for -h), 2 for a
// bad command line, 1 for anything else.
func runMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, errDiffers):
		return 1
	}
	var ec exitCode
	if errors.As(err, &ec) {
		fmt.Fprintln(stderr, err)
		return ec.code
	}
	switch {
	case strings.HasPrefix(err.Error(), "unknown command"):
		fmt.Fprintf(stderr, "kira: %v\n\n%s", err, root.UsageString())
		return 2
	default:
		fmt.Fprintln(stderr, err)
		return 1
	}
}
