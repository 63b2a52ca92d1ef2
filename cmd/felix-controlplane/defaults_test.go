package main

import (
	"bytes"
	"testing"
	"time"

	"felix/cluster/placement"
)

// TestLivenessDefaultsMatchPlacement: the command's suspect and down defaults
// are the placement package's (750 / 1500 ms), three and six of the broker's
// default 250 ms heartbeat (docs/controlplane.md, "Heartbeat and liveness
// defaults"). With the old 9000 / 18000 ms a default cluster needed 18 s to
// notice a dead leader, six times issue 20's 3 s failover budget.
func TestLivenessDefaultsMatchPlacement(t *testing.T) {
	cfg, err := loadConfigFile(func(string) (string, bool) { return "", false }, nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.suspectAfter != placement.DefaultSuspectAfter || cfg.downAfter != placement.DefaultDownAfter {
		t.Fatalf("suspect %v down %v, want placement's %v / %v", cfg.suspectAfter, cfg.downAfter,
			placement.DefaultSuspectAfter, placement.DefaultDownAfter)
	}
	const brokerHeartbeat = 250 * time.Millisecond // broker/config_cluster.go's default
	if cfg.suspectAfter != 3*brokerHeartbeat || cfg.downAfter != 6*brokerHeartbeat {
		t.Fatalf("suspect %v down %v: not three and six of the broker's %v heartbeat", cfg.suspectAfter, cfg.downAfter, brokerHeartbeat)
	}
}
