// Package devcluster runs a local Felix cluster on 127.0.0.1 as child processes: the
// felix-controlplane members and the felix-broker processes in cluster mode
// (FELIX_CONTROLPLANE_URL), each with its data dir and log file under one directory
// (`felix dev cluster`, docs/cli.md "felix dev cluster"; issue 21 item 1). Start brings
// them up and waits until every one is ready; Cluster.Stop stops them (SIGTERM, a bound,
// then SIGKILL). Restarting on the same directory resumes the same cluster: the same
// node ids, ports, data dirs and shared admin tokens.
//
// Port layout, from the base port B (DefaultBasePort = 7000):
//
//	control-plane member i (1..10)  REST B+i-1, Raft B+10+i-1, /ready /metrics B+20+i-1 (TCP)
//	broker i (1..10)                client QUIC (UDP) and admin + ops HTTP (TCP) B+100+i-1,
//	                                internal transport B+110+i-1 (UDP)
//
// Files under the directory D: D/cpN/ (member N's data dir; its admin-token and
// tenant-key-secret, the same in every member), D/cpN.log, D/brokerN/ (broker N's data
// dir; its admin.token is the CLI's token of tenant default, valid on every broker and
// for its clients: each broker's key store is a copy of cp1's, which holds tenant
// default's key derived from the tenant-key-secret), D/brokerN.log, and D/brokerN.pid,
// D/cpN.pid while it runs.
package devcluster

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Defaults of Config (docs/cli.md, "felix dev cluster").
const (
	DefaultBasePort          = 7000
	DefaultBrokers           = 3
	DefaultControlPlanes     = 3
	DefaultReplicationFactor = 3
	DefaultDataDir           = "felix-cluster"
	// MaxNodes is the most members and the most brokers a layout holds (10 ports per block).
	MaxNodes = 10
	// DefaultReadyTimeout bounds the wait for every child to be ready.
	DefaultReadyTimeout = 90 * time.Second
	// DefaultStopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	DefaultStopTimeout = 20 * time.Second
	// host is the address every child binds.
	host = "127.0.0.1"
)

// Kind names a child's program.
type Kind string

// The two kinds of child.
const (
	KindControlPlane Kind = "felix-controlplane"
	KindBroker       Kind = "felix-broker"
)

// Node is one child process of the layout: its name (cp1.., broker1..; also its node
// id), its addresses (host:port), its data dir and log file.
type Node struct {
	Kind Kind
	Name string
	// Control-plane member: REST, Raft and the metrics listener (/ready, /metrics).
	REST, Raft, Metrics string
	// Broker: Client is the QUIC client port (UDP) and, on the same number, the admin and
	// ops HTTP API (TCP); Internal is the broker-internal transport (UDP).
	Client, Internal string
	Dir              string // data dir
	LogPath          string // stdout and stderr, appended
	PIDPath          string // the running child's pid
}

// ReadyURL is the HTTP endpoint answering 200 once the child is ready.
func (n Node) ReadyURL() string {
	if n.Kind == KindControlPlane {
		return "http://" + n.Metrics + "/ready"
	}
	return "http://" + n.Client + "/ready"
}

// AdminURL is a broker's admin (and ops) API base URL, or a member's REST base URL.
func (n Node) AdminURL() string {
	if n.Kind == KindControlPlane {
		return "http://" + n.REST
	}
	return "http://" + n.Client
}

// Layout is the cluster's processes and files for one Config (Config.Layout).
type Layout struct {
	Dir           string // absolute
	ControlPlanes []Node
	Brokers       []Node
	// ReplicationFactor is Config.ReplicationFactor (the CLI's FELIX_REPLICATION_FACTOR).
	ReplicationFactor int
}

// ControlPlaneTokenFile is the control plane's admin token (every member holds a copy).
func (l Layout) ControlPlaneTokenFile() string {
	return filepath.Join(l.ControlPlanes[0].Dir, "admin-token")
}

// AdminTokenFile is the brokers' admin token for the CLI (tenant default), written by
// broker1 and valid on every broker.
func (l Layout) AdminTokenFile() string { return filepath.Join(l.Brokers[0].Dir, "admin.token") }

// ControlPlaneURLs are the members' REST base URLs.
func (l Layout) ControlPlaneURLs() []string { return mapNodes(l.ControlPlanes, Node.AdminURL) }

// Servers are the brokers' client (QUIC) addresses.
func (l Layout) Servers() []string {
	return mapNodes(l.Brokers, func(n Node) string { return n.Client })
}

// AdminURLs are the brokers' admin API base URLs.
func (l Layout) AdminURLs() []string { return mapNodes(l.Brokers, Node.AdminURL) }

// Nodes are every child: the members, then the brokers.
func (l Layout) Nodes() []Node { return append(append([]Node(nil), l.ControlPlanes...), l.Brokers...) }

func mapNodes(nodes []Node, f func(Node) string) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = f(n)
	}
	return out
}

// Ports are every port the layout binds, each with its protocol ("tcp" or "udp").
func (l Layout) Ports() map[int][]string {
	ports := map[int][]string{}
	add := func(addr string, protos ...string) {
		_, p, _ := strings.Cut(addr, ":")
		n, _ := strconv.Atoi(p)
		ports[n] = append(ports[n], protos...)
	}
	for _, n := range l.ControlPlanes {
		add(n.REST, "tcp")
		add(n.Raft, "tcp")
		add(n.Metrics, "tcp")
	}
	for _, n := range l.Brokers {
		add(n.Client, "udp", "tcp")
		add(n.Internal, "udp")
	}
	return ports
}

// Env is the environment of every child, as "FELIX_X=v" entries set after the
// inherited environment (so they win).
func (l Layout) Env(n Node) []string {
	if n.Kind == KindControlPlane {
		var peers, urls []string
		if len(l.ControlPlanes) > 1 {
			for _, p := range l.ControlPlanes {
				peers = append(peers, p.Name+"@"+p.Raft)
				urls = append(urls, p.Name+"@http://"+p.REST)
			}
		}
		return []string{"FELIX_CONTROLPLANE_NODE_ID=" + n.Name, "FELIX_CONTROLPLANE_BIND=" + n.REST,
			"FELIX_CONTROLPLANE_RAFT_BIND=" + n.Raft, "FELIX_CONTROLPLANE_METRICS_BIND=" + n.Metrics,
			"FELIX_CONTROLPLANE_DATA_DIR=" + n.Dir, "FELIX_CONTROLPLANE_PEERS=" + strings.Join(peers, ","),
			"FELIX_CONTROLPLANE_PEER_URLS=" + strings.Join(urls, ","), "FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS=5000"}
	}
	return []string{"FELIX_QUIC_BIND=" + n.Client, "FELIX_BROKER_METRICS_BIND=" + n.Client,
		"FELIX_INTERNAL_BIND=" + n.Internal, "FELIX_NODE_ID=" + n.Name,
		"FELIX_CONTROLPLANE_URL=" + strings.Join(l.ControlPlaneURLs(), ","),
		"FELIX_CONTROLPLANE_ADMIN_TOKEN_FILE=" + l.ControlPlaneTokenFile(),
		"FELIX_DURABLE_STORAGE_DIR=" + n.Dir, "FELIX_CLUSTER_PEERS=", "FELIX_READY_FILE=",
		"FELIX_AUTH_TOKEN=", "FELIX_AUTH_TENANT=", "FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS=5000"}
}

// Layout validates c and gives its processes and files. Errors: a count outside
// 1..MaxNodes, a replication factor outside 1..Brokers, a base port whose layout passes
// 65535 or is below 1024, no data dir.
func (c Config) Layout() (Layout, error) {
	c = c.withDefaults()
	switch {
	case c.Brokers < 1 || c.Brokers > MaxNodes:
		return Layout{}, fmt.Errorf("devcluster: %d brokers: want 1..%d", c.Brokers, MaxNodes)
	case c.ControlPlanes < 1 || c.ControlPlanes > MaxNodes:
		return Layout{}, fmt.Errorf("devcluster: %d control-plane members: want 1..%d", c.ControlPlanes, MaxNodes)
	case c.ReplicationFactor < 1 || c.ReplicationFactor > c.Brokers:
		return Layout{}, fmt.Errorf("devcluster: replication factor %d: want 1..%d (the number of brokers)", c.ReplicationFactor, c.Brokers)
	case c.BasePort < 1024 || c.BasePort+100+2*MaxNodes > 65535:
		return Layout{}, fmt.Errorf("devcluster: base port %d: want 1024..%d", c.BasePort, 65535-100-2*MaxNodes)
	}
	dir, err := filepath.Abs(c.DataDir)
	if err != nil {
		return Layout{}, fmt.Errorf("devcluster: data dir: %w", err)
	}
	l := Layout{Dir: dir, ReplicationFactor: c.ReplicationFactor}
	addr := func(off int) string { return host + ":" + strconv.Itoa(c.BasePort+off) }
	files := func(n *Node) {
		n.Dir = filepath.Join(dir, n.Name)
		n.LogPath, n.PIDPath = n.Dir+".log", n.Dir+".pid"
	}
	for i := range c.ControlPlanes {
		n := Node{Kind: KindControlPlane, Name: "cp" + strconv.Itoa(i+1), REST: addr(i), Raft: addr(10 + i), Metrics: addr(20 + i)}
		files(&n)
		l.ControlPlanes = append(l.ControlPlanes, n)
	}
	for i := range c.Brokers {
		n := Node{Kind: KindBroker, Name: "broker" + strconv.Itoa(i+1), Client: addr(100 + i), Internal: addr(110 + i)}
		files(&n)
		l.Brokers = append(l.Brokers, n)
	}
	return l, nil
}

// ShellEnv is the CLI's environment for this cluster as `export` lines (what
// `felix dev cluster --print-env` prints, for eval): FELIX_SERVER and FELIX_ADMIN_URL list
// every broker, FELIX_CONTROLPLANE_URL every member, FELIX_TOKEN_FILE the brokers' admin
// token, FELIX_REPLICATION_FACTOR the default of `felix cluster stream create`, and
// FELIX_DEV_BROKER1.. each broker's client address (for --server).
func (l Layout) ShellEnv() string {
	var b strings.Builder
	vars := [][2]string{
		{"FELIX_SERVER", strings.Join(l.Servers(), ",")},
		{"FELIX_ADMIN_URL", strings.Join(l.AdminURLs(), ",")},
		{"FELIX_CONTROLPLANE_URL", strings.Join(l.ControlPlaneURLs(), ",")},
		{"FELIX_TOKEN_FILE", l.AdminTokenFile()},
		{"FELIX_REPLICATION_FACTOR", strconv.Itoa(l.ReplicationFactor)},
	}
	for i, n := range l.Brokers {
		vars = append(vars, [2]string{"FELIX_DEV_BROKER" + strconv.Itoa(i+1), n.Client})
	}
	for _, kv := range vars {
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	return b.String()
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
