package main

import "github.com/spf13/cobra"

// rawFlag adds --raw to cmd (sub, cache get): payloads and values are written byte for
// byte, without the newline text output adds to a value that does not end in one, so
// `felix cache get c k --raw > file` and `felix sub s --count 1 --raw > file` copy binary
// data exactly (issue 23 item 10; records of a --raw sub follow each other unseparated).
func (a *app) rawFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&a.raw, "raw", false, "write payloads/values byte for byte: no newline added, no separator")
}

// checkRaw refuses --raw with --json or --offsets (usage error): neither leaves the bytes
// alone.
func (a *app) checkRaw(offsets bool) error {
	switch {
	case a.raw && a.jsonOut:
		return usagef("--raw and --json exclude each other")
	case a.raw && offsets:
		return usagef("--raw and --offsets exclude each other")
	}
	return nil
}

// checkSubFlags is sub's flag check: --raw's exclusions, then a non-negative --count.
func (a *app) checkSubFlags(offsets bool, count int64) error {
	if err := a.checkRaw(offsets); err != nil {
		return err
	}
	return checkNonNegative("count", count)
}
