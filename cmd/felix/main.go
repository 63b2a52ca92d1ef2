// Command felix is Felix's command-line tool: publish and subscribe, cache operations,
// consumer groups, the catalog (streams and caches through the broker's admin API), token
// issuing, and offline log inspection. docs/cli.md is its manual; `felix --help` lists the
// commands, the FELIX_* defaults and the exit codes.
package main

import (
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv))
}

// run executes one felix command line and returns its exit code (exit.go). It reads the
// environment only through lookupEnv, so tests can run it in-process.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	app := newApp(stdin, stdout, stderr, lookupEnv)
	cmd := app.rootCommand()
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err != nil {
		app.reportError(err)
	}
	return exitCode(err)
}
