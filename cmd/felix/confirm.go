package main

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// addYesFlag adds --yes to a destructive command (stream delete, cache delete) and
// returns where its value lands.
func addYesFlag(cmd *cobra.Command) *bool {
	yes := cmd.Flags().Bool("yes", false, "do not ask: delete without typing the name to confirm")
	return yes
}

// confirmDelete asks, unless yes, for the name of the kind ("stream", "cache") about to be
// deleted with its data: the prompt goes to stderr and one line is read from stdin; only
// the exact name confirms. Anything else, or no input (a script without --yes), is a
// usage error (exit 2) and nothing is deleted (issue 23 item 10; docs/cli.md).
func (a *app) confirmDelete(kind, name string, yes bool) error {
	if yes {
		return nil
	}
	fmt.Fprintf(a.stderr, "Delete %s %s/%s/%s and all its data? Type its name to confirm (or pass --yes): ", kind, a.tenant, a.namespace, name)
	return a.readConfirmation(kind, name)
}

// readConfirmation reads one line from stdin: nil when it is exactly name, else the usage
// error of confirmDelete.
func (a *app) readConfirmation(kind, name string) error {
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if strings.TrimRight(line, "\r\n") == name {
		return nil
	}
	if err != nil && line == "" {
		return usagef("%s %s not deleted: no confirmation on stdin (pass --yes to delete without asking)", kind, name)
	}
	return usagef("%s %s not deleted: the confirmation %q is not its name", kind, name, strings.TrimRight(line, "\r\n"))
}
