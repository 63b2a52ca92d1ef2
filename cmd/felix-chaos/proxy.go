package main

import (
	"errors"
	"fmt"
	"io"

	"felix/testbed/faultproxy"
)

// runProxy is `felix-chaos proxy`: the UDP fault proxy for QUIC links
// (testbed/faultproxy; docs/cluster-testing.md, "Fault proxy"). It runs until
// interrupted; bad flags exit 2, a failure to start or serve exits 1.
func runProxy(args []string, stdout, stderr io.Writer) int {
	err := faultproxy.RunCommand(args, stdout)
	if errors.Is(err, faultproxy.ErrUsage) {
		fmt.Fprintf(stderr, "felix-chaos proxy: %v\n", err)
		return exitUsage
	}
	return errorExit(stderr, "proxy", err)
}
