// Package testmain holds what the TestMain functions of packages that build a binary
// before their tests share. Only tests import it.
package testmain

import "flag"

// FuzzOnly reports whether this test binary runs a fuzz target and nothing else: a fuzzing
// worker (-test.fuzzworker), or the coordinator of `go test -run='^$' -fuzz=F` (how
// `make fuzz` and `make fuzz-ci` call it). Then no test needs the binary a TestMain would
// build (the broker, built per test binary and per fuzz worker, otherwise takes the whole
// fuzz time of a short run: 0 executions in 3 s). It parses the command line's flags.
func FuzzOnly() bool {
	flag.Parse()
	value := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	return value("test.fuzzworker") == "true" || (value("test.fuzz") != "" && value("test.run") == "^$")
}
