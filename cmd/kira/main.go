// Command kira runs a sharded, replicated job scheduler on etcd.
//
//	kira run      --catalog FILE [--etcd URLS]   run a member (embedded etcd when no URLs)
//	kira etcd     [etcd flags]                   run a standalone embedded etcd server
//	kira status   [--etcd URLS] [--cluster NAME] [-o json]
//	kira apply    -f FILE [--dry-run]            store a catalog; members converge
//	kira pause|resume|trigger|history JOB        operate on one job
//	kira validate FILE
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// errUsage is returned for bad command lines; the message was already printed.
var errUsage = errors.New("usage")

const usage = `kira: a sharded, replicated job scheduler on etcd.

Usage:
  kira run      [--catalog FILE] [--etcd URLS] [--data-dir DIR] [--name NAME] [--http ADDR]
  kira etcd     [--name N] [--data-dir DIR] [--listen-client-urls URLS] ... (etcd's own flags)
  kira status   [--etcd URLS] [--cluster NAME] [-o json]
  kira apply    -f FILE [--dry-run] [--etcd URLS]
  kira pause    JOB [--etcd URLS] [--cluster NAME]
  kira resume   JOB [--etcd URLS] [--cluster NAME]
  kira trigger  JOB [--partition N] [--etcd URLS] [--cluster NAME]
  kira history  JOB [-n 20] [--partition N] [-o json] [--etcd URLS] [--cluster NAME]
  kira validate FILE
  kira bench    [--slots 100,1000,10000] [--ttls 2s,6s,15s] [--trials 9] [--rebalance 10000] [--etcd URLS | --etcd-fast] [-o json]

Run "kira COMMAND -h" for a command's flags.
`

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "run" || os.Args[1] == "bench") {
		useSchedulerProcs(os.Getenv("GOMAXPROCS"))
	}
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "run":
		err = runCommand(args[1:], stderr)
	case "etcd":
		err = etcdCommand(args[1:], stderr)
	case "status":
		err = statusCommand(args[1:], stdout, stderr)
	case "validate":
		err = validateCommand(args[1:], stdout, stderr)
	case "apply":
		err = applyCommand(args[1:], stdout, stderr)
	case "pause", "resume":
		err = pauseCommand(args[1:], stdout, stderr, args[0] == "pause")
	case "trigger":
		err = triggerCommand(args[1:], stdout, stderr)
	case "history":
		err = historyCommand(args[1:], stdout, stderr)
	case "bench":
		err = benchCommand(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "kira", version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "kira: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintln(stderr, err)
		return 1
	}
}
