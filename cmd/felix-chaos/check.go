package main

import (
	"fmt"
	"io"
	"time"

	"felix/testbed/checker"
	"felix/testbed/history"
)

// runCheck loads a JSON-lines history, runs every checker, prints each
// finding and a line per checker, then "N passed, M failed" over the
// checkers. A malformed history exits 2 with the line named.
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", stderr)
	viz := fs.String("viz", "", "where porcupine's HTML visualization goes when linearizability fails (default: HISTORY.lin.html; \"-\" for none)")
	timeout := fs.Duration("timeout", time.Minute, "linearizability search limit per object (0: none); a timed-out object is reported, not failed")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: felix-chaos check [-viz PATH] [-timeout D] HISTORY")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	path := fs.Arg(0)
	h, err := history.LoadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "felix-chaos check: %s: %v\n", path, err)
		return exitUsage
	}
	vizPath := *viz
	switch vizPath {
	case "":
		vizPath = path + ".lin.html"
	case "-":
		vizPath = ""
	}
	fmt.Fprintf(stdout, "history %s: %d operations\n", path, len(h.Ops))
	rep, err := checker.CheckAll(h, checker.Options{Linear: checker.LinearOptions{Timeout: *timeout, VisualizationPath: vizPath}})
	if err != nil {
		fmt.Fprintf(stderr, "felix-chaos check: %v\n", err)
	}
	passed, failed := rep.Print(stdout)
	if rep.Visualization != "" {
		fmt.Fprintf(stdout, "linearizability visualization: %s\n", rep.Visualization)
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return exitFindings
	}
	return exitOK
}
