// Package controlplane is the control plane's acceptance test under SIGKILL (issue 17,
// acceptance bullets 2 and 4): three felix-controlplane processes on 127.0.0.1, the
// leader SIGKILLed and restarted in a loop while concurrent clients create, delete and
// read streams through the REST API of any member, every operation recorded in a history
// (testbed/history) that the test bed's porcupine model of the catalog (testbed/checker,
// one register per catalog entry) must find linearizable. It measures the election pause
// per kill (SIGKILL to the first successful catalog write through a survivor) and the
// Apply latency of sequential REST writes on the leader.
//
// Everything lives in the test files: `go test ./e2e/controlplane` is the CI size (10
// kills), `make soak-controlplane` the long run (FELIX_CP_KILLS). docs/bench/controlplane.md
// has the commands and the figures.
package controlplane
