// Package scenario is the cluster test bed's registry of named fault
// scenarios (issue 15, item 6) and what runs them: `felix-chaos run
// --scenario NAME` and `felix-chaos soak`.
//
// A Scenario is a name, a one-line description, default sizes and a Run
// function. Run gets an Env: the run's seed (FELIX_TEST_SEED or --seed, else
// random; always printed, so a failed run replays its kill schedule and
// workload choices), a work directory, the binaries (felix-broker and felix,
// built once per felix-chaos invocation with `go build -o DIR/`), a process
// supervisor (felix/testbed/supervisor) logging into DIR/logs, a history
// recorder (felix/testbed/history) writing DIR/history.jsonl, and the size
// knobs (operations, kills, duration). It returns a Result: the table of what
// was checked, each row informational or a verdict (ok / FAIL), and the
// checkers' report (felix/testbed/checker) on the recorded history.
//
// Scenarios register themselves with MustRegister from an init function; the
// built-in one is single-node-kill (singlenode*.go): one broker SIGKILLed N
// times while publishes, subscriptions, cache and counter operations are in
// flight, then final reads and every checker on the history.
//
// Every wait is bounded by a context or a documented constant, and no
// scenario synchronizes by sleeping: progress is signalled (tracker) and the
// supervisor's readiness is a ready file. Only 127.0.0.0/8 addresses are
// targets. docs/cluster-testing.md, "Scenarios", is the guide.
package scenario
