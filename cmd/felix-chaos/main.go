// Command felix-chaos is the cluster test bed's tool (issue 15): it checks
// recorded histories for anomalies and proves its checkers work.
//
//	felix-chaos selftest [-viz DIR]                 plant each anomaly, find it; clean twins stay clean
//	felix-chaos check [-viz PATH] [-timeout D] HISTORY   run every checker on a JSON-lines history
//	felix-chaos proxy --listen A --upstream B --control C --seed N   the UDP fault proxy
//	felix-chaos run --scenario NAME [--seed N] [--kills N] [--ops N] [--dir D]   one scenario, checked
//	felix-chaos run --list                          the registered scenarios (felix/testbed/scenario)
//	felix-chaos soak --duration D [--scenario NAME]  a scenario again and again with fresh seeds
//
// selftest, check, run and soak end with the line "N passed, M failed" and exit 1 when M > 0; usage
// errors and unreadable histories exit 2. docs/cluster-testing.md is the guide.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"felix/internal/version"
)

// subcommand is one entry of the table: its name, a one-line summary for the
// usage text, and its runner, which returns the process exit code.
type subcommand struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// subcommands is the table; each subcommand lives in its own file. The test
// bed's run and soak subcommands join it, each a line here and a file.
var subcommands = []subcommand{
	{"selftest", "plant every anomaly in a history and check the checkers find it (and nothing in clean twins)", runSelftest},
	{"check", "run every checker on a JSON-lines history file", runCheck},
	{"proxy", "run the UDP fault proxy for one QUIC link (faults set over its loopback control API)", runProxy},
	{"run", "run one scenario of the registry (--scenario NAME, --list) and check its history", runRun},
	{"soak", "repeat a scenario with fresh seeds until --duration ends", runSoak},
}

// Exit codes.
const (
	exitOK       = 0 // everything passed
	exitFindings = 1 // a check failed (anomalies found, selftest cases failed, a subcommand's error)
	exitUsage    = 2 // bad arguments or unreadable input
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches args[0] to its subcommand and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "version" {
		fmt.Fprintln(stdout, version.Get().Line("felix-chaos"))
		return exitOK
	}
	for _, c := range subcommands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "felix-chaos: unknown subcommand %q\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: felix-chaos SUBCOMMAND [flags] [args]")
	for _, c := range subcommands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
}

// newFlags returns a flag set for subcommand name that reports to stderr.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("felix-chaos "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args; ok is false when the subcommand should stop, with
// code its exit code (0 for -h, 2 for a bad flag).
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return exitOK, true
}

// errorExit prints a subcommand's error and maps it to an exit code: nil is
// exitOK, anything else exitFindings. For subcommands whose package returns
// an error (faultproxy.RunCommand).
func errorExit(stderr io.Writer, name string, err error) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "felix-chaos %s: %v\n", name, err)
	return exitFindings
}
