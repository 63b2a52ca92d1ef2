package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"felix/internal/version"
)

// versionCommand is `felix version`: the release, commit and Go toolchain of this felix
// (internal/version; the same line as `felix --version`). --json prints
// {"version","commit","modified","build_time","go"}.
func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print felix's version and the commit it was built from",
		Args:  nArgs(0, 0),
		RunE: func(*cobra.Command, []string) error {
			info := version.Get()
			if a.jsonOut {
				a.printJSON(info)
				return nil
			}
			fmt.Fprintln(a.stdout, info.Line("felix"))
			return nil
		},
	}
}
