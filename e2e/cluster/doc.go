// Package cluster holds the process-level acceptance test of the broker side of the
// control plane (issue 17, item 8 and the third acceptance bullet; docs/controlplane.md,
// "The broker side"): one felix-controlplane member and three felix-broker processes in
// cluster mode (FELIX_CONTROLPLANE_URL) on free 127.0.0.1 ports. The brokers register; a
// stream with replication factor 3 is created through one broker's admin API; every
// broker's ownership table (GET /cluster/ownership on its ops port) agrees with the control
// plane's placement (GET /v1/snapshot); records published to each shard's leader reach the
// followers' durable offsets; and the change feed's lag to all three brokers is measured
// over 50 changes (p50/p99, docs/bench/controlplane-feed.md). A broker the control plane
// refuses at registration (a finalized feature it lacks) exits non-zero; brokers given the
// three members of a three-member control plane keep working through a SIGKILL of its
// leader.
//
// Everything lives in the test files: go test ./e2e/cluster (FELIX_CLUSTER_FEED_CHANGES
// sets the number of measured changes, 50 by default).
package cluster
