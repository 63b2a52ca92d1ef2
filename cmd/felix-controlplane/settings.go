package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"felix/cluster/meta"
)

// setting is one FELIX_* variable of the control plane (spec/config.md §5;
// issue 17 item 1): its name, default and meaning.
type setting struct {
	env, def, help string
}

// settings are every variable the command reads, in --print-config order.
// The defaults listen on 127.0.0.1 ports that do not clash with the broker's
// :5000 and :8080, so `go run ./cmd/felix-controlplane` works on a fresh
// machine.
var settings = []setting{
	{"FELIX_CONTROLPLANE_NODE_ID", "cp1", "this member's id (its Raft server id)"},
	{"FELIX_CONTROLPLANE_BIND", "127.0.0.1:8443", "REST API listener"},
	{"FELIX_CONTROLPLANE_RAFT_BIND", "127.0.0.1:8444", "Raft TCP listener (an advertisable address: the peers dial it)"},
	{"FELIX_CONTROLPLANE_PEERS", "", "initial voters id@host:port,... (Raft addresses); empty bootstraps a one-member group"},
	{"FELIX_CONTROLPLANE_PEER_URLS", "", "the peers' REST base URLs id@http://host:port,... (a follower forwards writes there)"},
	{"FELIX_CONTROLPLANE_DATA_DIR", "felix-controlplane-data", "WAL, snapshots and the admin token"},
	{"FELIX_CONTROLPLANE_METRICS_BIND", "127.0.0.1:8081", "/live, /ready, /metrics listener"},
	{"FELIX_CONTROLPLANE_SNAPSHOT_THRESHOLD", "1024", "log entries between Raft snapshots (a restarted member replays at most about this many after its snapshot)"},
	{"FELIX_CONTROLPLANE_SNAPSHOT_INTERVAL_MS", "10000", "how often Raft checks the threshold, ms (raft adds up to as much again of jitter)"},
	{"FELIX_CONTROLPLANE_CHANGE_RETENTION_MAX_ROWS", "10000", "change-feed rows kept (older cursors get 410)"},
	{"FELIX_CONTROLPLANE_CHANGES_LIMIT", "1000", "max changes per feed page"},
	{"FELIX_CONTROLPLANE_SUSPECT_AFTER_MS", "750", "placement loop: a broker without a heartbeat this long is suspect (three of the broker's default 250 ms heartbeats; docs/controlplane.md, \"Heartbeat and liveness defaults\")"},
	{"FELIX_CONTROLPLANE_DOWN_AFTER_MS", "1500", "placement loop: a broker without a heartbeat this long is down and the shards it leads fail over (six of the broker's default 250 ms heartbeats; half of issue 20's 3 s failover budget; raise both with slower broker heartbeats)"},
	{"FELIX_CONTROLPLANE_PLACEMENT_TICK_MS", "100", "placement loop: how often the leader decides"},
	{"FELIX_CONTROLPLANE_AUTO_FAILOVER", "off", "placement loop: on promotes a follower when a shard's leader is down; off (the default) promotes nothing: promotion has no fence round yet and can lose acknowledged Quorum records (docs/failover.md, \"What is unsafe, exactly\")"},
	{"FELIX_AUTH", "on", "off disables the admin token check (a warning is logged)"},
	{"FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS", "25000", "SIGTERM drain budget, ms"},
	{"FELIX_TEST_METADATA_LEVEL", "", "test only: the metadata level this member reports, 1..14, playing an older build (a warning is logged)"},
}

// peer is one FELIX_CONTROLPLANE_PEERS (or _PEER_URLS) entry.
type peer struct{ id, addr string }

// config is the effective configuration.
type config struct {
	nodeID, bind, raftBind, dataDir, metricsBind string
	peers, peerURLs                              []peer
	snapshotThreshold                            uint64
	snapshotInterval, drain                      time.Duration
	retention, changesLimit                      int
	suspectAfter, downAfter, placementTick       time.Duration
	authOff                                      bool
	autoFailover                                 bool       // FELIX_CONTROLPLANE_AUTO_FAILOVER=on
	level                                        meta.Level // FELIX_TEST_METADATA_LEVEL (0 = the build's)
	values, sources                              map[string]string
}

// loadConfig reads the settings through lookup (os.LookupEnv). Errors name
// the variable and its bad value.
func loadConfig(lookup func(string) (string, bool)) (*config, error) {
	c := &config{values: map[string]string{}, sources: map[string]string{}}
	for _, s := range settings {
		v, ok := lookup(s.env)
		c.values[s.env], c.sources[s.env] = s.def, "default"
		if ok {
			c.values[s.env], c.sources[s.env] = v, "env"
		}
	}
	v := c.values
	c.nodeID, c.bind, c.raftBind = v["FELIX_CONTROLPLANE_NODE_ID"], v["FELIX_CONTROLPLANE_BIND"], v["FELIX_CONTROLPLANE_RAFT_BIND"]
	c.dataDir, c.metricsBind = v["FELIX_CONTROLPLANE_DATA_DIR"], v["FELIX_CONTROLPLANE_METRICS_BIND"]
	var errs []error
	if c.nodeID == "" || strings.ContainsAny(c.nodeID, "@, /") {
		errs = append(errs, fmt.Errorf("FELIX_CONTROLPLANE_NODE_ID=%q: a non-empty id without '@', ',', ' ' or '/'", c.nodeID))
	}
	if c.dataDir == "" {
		errs = append(errs, errors.New("FELIX_CONTROLPLANE_DATA_DIR is empty"))
	}
	for _, env := range []string{"FELIX_CONTROLPLANE_BIND", "FELIX_CONTROLPLANE_RAFT_BIND", "FELIX_CONTROLPLANE_METRICS_BIND"} {
		if _, _, err := net.SplitHostPort(v[env]); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %v", env, v[env], err))
		}
	}
	var err error
	if c.peers, err = parsePeers("FELIX_CONTROLPLANE_PEERS", v["FELIX_CONTROLPLANE_PEERS"]); err != nil {
		errs = append(errs, err)
	}
	if c.peerURLs, err = parsePeers("FELIX_CONTROLPLANE_PEER_URLS", v["FELIX_CONTROLPLANE_PEER_URLS"]); err != nil {
		errs = append(errs, err)
	}
	if len(c.peers) > 0 && !hasPeer(c.peers, c.nodeID) {
		errs = append(errs, fmt.Errorf("FELIX_CONTROLPLANE_PEERS does not name this member %q", c.nodeID))
	}
	for _, p := range c.peers {
		if p.id != c.nodeID && !hasPeer(c.peerURLs, p.id) {
			errs = append(errs, fmt.Errorf("FELIX_CONTROLPLANE_PEER_URLS has no URL for peer %q: a fresh member learns each peer's storage identity there", p.id))
		}
	}
	errs = append(errs, c.numbers()...)
	if lv := v["FELIX_TEST_METADATA_LEVEL"]; lv != "" {
		n, err := strconv.Atoi(lv)
		if err != nil || n < int(meta.LevelBase) || n > int(meta.BuildMaxLevel) {
			errs = append(errs, fmt.Errorf("FELIX_TEST_METADATA_LEVEL=%q: a level in %d..%d", lv, meta.LevelBase, meta.BuildMaxLevel))
		}
		c.level = meta.Level(n)
	}
	switch v["FELIX_AUTH"] {
	case "on", "":
	case "off":
		c.authOff = true
	default:
		errs = append(errs, fmt.Errorf("FELIX_AUTH=%q: on or off", v["FELIX_AUTH"]))
	}
	switch v["FELIX_CONTROLPLANE_AUTO_FAILOVER"] {
	case "off", "":
	case "on":
		c.autoFailover = true
	default:
		errs = append(errs, fmt.Errorf("FELIX_CONTROLPLANE_AUTO_FAILOVER=%q: on or off", v["FELIX_CONTROLPLANE_AUTO_FAILOVER"]))
	}
	return c, errors.Join(errs...)
}

// numbers parses the numeric settings (each a positive integer).
func (c *config) numbers() []error {
	var errs []error
	num := func(env string) int64 {
		n, err := strconv.ParseInt(c.values[env], 10, 64)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: a positive integer", env, c.values[env]))
		}
		return n
	}
	c.snapshotThreshold = uint64(max(num("FELIX_CONTROLPLANE_SNAPSHOT_THRESHOLD"), 0))
	c.snapshotInterval = time.Duration(num("FELIX_CONTROLPLANE_SNAPSHOT_INTERVAL_MS")) * time.Millisecond
	c.retention = int(num("FELIX_CONTROLPLANE_CHANGE_RETENTION_MAX_ROWS"))
	c.changesLimit = int(num("FELIX_CONTROLPLANE_CHANGES_LIMIT"))
	c.drain = time.Duration(num("FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS")) * time.Millisecond
	c.suspectAfter = time.Duration(num("FELIX_CONTROLPLANE_SUSPECT_AFTER_MS")) * time.Millisecond
	c.downAfter = time.Duration(num("FELIX_CONTROLPLANE_DOWN_AFTER_MS")) * time.Millisecond
	c.placementTick = time.Duration(num("FELIX_CONTROLPLANE_PLACEMENT_TICK_MS")) * time.Millisecond
	return errs
}

// parsePeers reads id@address,...; empty is none.
func parsePeers(env, s string) ([]peer, error) {
	var out []peer
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "@")
		if !ok || id == "" || addr == "" || hasPeer(out, id) {
			return nil, fmt.Errorf("%s: %q is not id@address (or the id repeats)", env, part)
		}
		out = append(out, peer{id, addr})
	}
	return out, nil
}

func hasPeer(ps []peer, id string) bool {
	for _, p := range ps {
		if p.id == id {
			return true
		}
	}
	return false
}

// print writes every effective setting with its source (--print-config).
func (c *config) print(w io.Writer) error {
	for _, s := range settings {
		if _, err := fmt.Fprintf(w, "%s=%s\t# %s; %s\n", s.env, c.values[s.env], c.sources[s.env], s.help); err != nil {
			return err
		}
	}
	return nil
}
