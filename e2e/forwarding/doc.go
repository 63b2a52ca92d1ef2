// Package forwarding holds the three-broker acceptance test of forwarding and redirects
// (issue 19; docs/forwarding.md, "Acceptance"): three felix-broker processes of one static
// cluster on 127.0.0.1, concurrent idempotent producers publishing through every broker,
// subscribers reading each shard through redirects, cache and counter clients going
// through non-owners, the history recorded with testbed/history and checked with
// testbed/checker (stream anomalies; porcupine for the cache and counters), a planted
// anomaly the checkers must find, and a SIGKILLed non-owner broker whose clients fail over
// to the other brokers (client.WithFailover) without losing an acknowledged record.
//
// Everything lives in the test files: go test ./e2e/forwarding (FELIX_TEST_SEED replays a
// run's random choices).
package forwarding
