// Package clustercrash is the real-corpus crash test of the single node, on a cluster (issue
// 21 item 2; docs/soak.md "Cluster"): three felix-controlplane members and three
// felix-broker processes on 127.0.0.1 (testbed/clusterbed), corpus files published through
// all three brokers (one record per file, keyed by path, idempotent producers) onto an
// 8-shard replication-factor-3 Quorum stream with subscribers and a two-consumer group, then
// a cache phase (SHA-256 per path, a counter per directory) on an RF3 cache, while the run
// SIGKILLs shard leaders, stops one broker (SIGSTOP, cut off from everyone while it lasts)
// and SIGKILLs the control plane's Raft leader. At the end: every acknowledged file is in its
// shard exactly once with its hash, no gap, duplicate or reordering per shard, what each
// subscriber saw is what the log holds at those offsets, the group saw every acknowledged
// record at least once, every replica's logs verify and are identical up to the leader's
// committed offset, cache and counters are as the model says, and the peak RSS per process.
//
// Knobs: FELIX_CLUSTER_CRASH_FILES (files, default 1500; 0 = the whole corpus),
// FELIX_CLUSTER_CRASH_KILLS (shard-leader SIGKILLs per phase, default 4),
// FELIX_CLUSTER_CRASH_CP_KILLS (control-plane leader SIGKILLs per phase, default 1),
// FELIX_CLUSTER_CRASH_FAILOVER=1 (the control plane's automatic failover on: a killed leader
// stays down 2.5–4 s, past the 1.5 s down timeout, so a follower is promoted),
// FELIX_TEST_SEED (replays the fault schedule's choices). `make soak-cluster` runs the long one.
package clustercrash

import (
	"os"
	"strconv"
	"testing"

	"felix/testbed/scenario"
)

// bins are felix-broker and felix-controlplane, built once by TestMain.
var bins struct{ broker, controlPlane string }

func TestMain(m *testing.M) {
	scenario.MainWithCommands("felix-e2e-clustercrash-bin", func(p map[string]string) {
		bins.broker, bins.controlPlane = p["felix-broker"], p["felix-controlplane"]
	}, m.Run, "felix-broker", "felix-controlplane")
}

// The run's names and sizes.
const (
	tenant     = "t1"
	namespace  = "n1"
	streamName = "corpus"
	cacheName  = "sums"
	shards     = 8
	maxPayload = 512 << 10 // a record above this is left out of the corpus (and counted)
)

// config is the run's size, from the environment.
type config struct {
	files, kills, cpKills int
	failover              bool
}

func loadConfig(t *testing.T) config {
	c := config{files: 1500, kills: 4, cpKills: 1}
	for _, kv := range []struct {
		name string
		dst  *int
	}{{"FELIX_CLUSTER_CRASH_FILES", &c.files}, {"FELIX_CLUSTER_CRASH_KILLS", &c.kills}, {"FELIX_CLUSTER_CRASH_CP_KILLS", &c.cpKills}} {
		if v := os.Getenv(kv.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want a count", kv.name, v)
			}
			*kv.dst = n
		}
	}
	c.failover = os.Getenv("FELIX_CLUSTER_CRASH_FAILOVER") == "1"
	return c
}
