package main

import (
	"fmt"
	"io"
	"os"

	"felix/testbed/checker"
)

// selfTest is checker.RunSelfTest; tests replace it to see a failing run.
var selfTest = checker.RunSelfTest

// runSelftest runs checker.RunSelfTest: one line per case, then
// "N passed, M failed". -viz DIR writes the planted histories'
// linearizability visualizations there (created if missing).
func runSelftest(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("selftest", stderr)
	viz := fs.String("viz", "", "directory for the planted histories' porcupine visualizations (default: none)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "felix-chaos selftest: takes no arguments")
		return exitUsage
	}
	if *viz != "" {
		if err := os.MkdirAll(*viz, 0o755); err != nil {
			fmt.Fprintf(stderr, "felix-chaos selftest: %v\n", err)
			return exitUsage
		}
	}
	if _, failed := selfTest(stdout, *viz); failed > 0 {
		return exitFindings
	}
	return exitOK
}
