package broker

// The broker-internal transport settings (issue 16; seeds/internal-protocol.txt, "Why it is a
// separate protocol" and "The transport"; spec/config.md §3 PROPOSED names). Server starts
// the internal listener and pool from them when FELIX_INTERNAL_BIND is set (internal.go).

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"felix/cluster/transport"
)

// ClusterConfig holds the internal-transport settings (embedded in Config).
type ClusterConfig struct {
	InternalBind           string // FELIX_INTERNAL_BIND: internal QUIC listener, UDP host:port; "" = none (single node)
	NodeID                 string // FELIX_NODE_ID: this broker's identity, a valid DNS name (transport.ValidNodeID)
	InternalAdvertisedAddr string // FELIX_INTERNAL_ADVERTISED_ADDR: where peers dial this broker; "" ⇒ InternalBind
	AdvertisedAddr         string // FELIX_ADVERTISED_ADDR: client address peers hand out in NotLeader; "" ⇒ QUICBind
	InternalTLSCert        string // FELIX_INTERNAL_TLS_CERT (PEM; DNS name = node id; re-read every 30 s)
	InternalTLSKey         string // FELIX_INTERNAL_TLS_KEY (PEM)
	InternalTLSCA          string // FELIX_INTERNAL_TLS_CA (PEM bundle, read once)
	// ClusterPeers is FELIX_CLUSTER_PEERS parsed (static_cluster.go): every broker of a
	// static cluster, this one included; nil = no static cluster.
	ClusterPeers []StaticPeer
	// ControlPlane holds the cluster-mode settings (FELIX_CONTROLPLANE_URL is
	// Config.ControlplaneURL; controlplane.go).
	ControlPlane ControlPlaneConfig
}

// ControlPlaneConfig is the broker's cluster mode (issue 17 item 8; docs/controlplane.md,
// "The broker side"; spec/config.md §1): with FELIX_CONTROLPLANE_URL set the broker
// registers with the control plane, heartbeats, and takes its catalog, ownership table and
// peer addresses from the snapshot and the change feed.
type ControlPlaneConfig struct {
	// URLs is FELIX_CONTROLPLANE_URL split at commas: the members' REST base URLs.
	URLs []string
	// TokenFile is FELIX_CONTROLPLANE_ADMIN_TOKEN_FILE: the control plane's admin token
	// (its DATA_DIR/admin-token), sent on registration, heartbeats and forwarded admin
	// writes; "" sends none (a control plane with FELIX_AUTH=off).
	TokenFile string
	// HeartbeatIntervalMS is FELIX_CONTROLPLANE_HEARTBEAT_INTERVAL_MS (250: the control
	// plane's placement loop reads a broker suspect after 750 ms and down after 1500 ms,
	// three and six heartbeats; docs/controlplane.md, "Heartbeat and liveness defaults").
	HeartbeatIntervalMS int
	// SyncIntervalMS is FELIX_CONTROLPLANE_SYNC_INTERVAL_MS (2000): the longest pause
	// between attempts while the control plane is away (the backoff cap); the feed itself
	// is a long poll and brings a change at once.
	SyncIntervalMS int
}

// InternalTLSFiles returns the three FELIX_INTERNAL_TLS_* paths for transport.LoadCredentials.
func (c *ClusterConfig) InternalTLSFiles() transport.TLSFiles {
	return transport.TLSFiles{Cert: c.InternalTLSCert, Key: c.InternalTLSKey, CA: c.InternalTLSCA}
}

// optionalAddr accepts "" or host:port (port 0..65535 or a service name).
func optionalAddr(field func(*Config) *string) (func(*Config, string) error, func(*Config) string) {
	set, get := addr(field)
	return func(c *Config, v string) error {
		if v == "" {
			*field(c) = ""
			return nil
		}
		return set(c, v)
	}, get
}

func nodeID() (func(*Config, string) error, func(*Config) string) {
	return func(c *Config, v string) error {
			if v != "" {
				if err := transport.ValidNodeID(v); err != nil {
					return fmt.Errorf("want a valid DNS name (labels of letters, digits and '-', dot-separated, at most 253 bytes): %v", err)
				}
			}
			c.NodeID = v
			return nil
		},
		func(c *Config) string { return c.NodeID }
}

// clusterSettings are the internal-transport rows of settings().
func clusterSettings() []setting {
	var s []setting
	add := func(env, flagName, help string, set func(*Config, string) error, get func(*Config) string) {
		s = append(s, setting{env: env, flag: flagName, def: "", help: help, set: set, get: get})
	}
	a, b := optionalAddr(func(c *Config) *string { return &c.InternalBind })
	add("FELIX_INTERNAL_BIND", "internal-bind", "broker-internal QUIC listener (UDP host:port, ALPN felix-internal/1; empty = none); must not share the client port", a, b)
	a, b = nodeID()
	add("FELIX_NODE_ID", "node-id", "this broker's node id, a valid DNS name (the internal certificate's name); required with FELIX_INTERNAL_BIND", a, b)
	a, b = optionalAddr(func(c *Config) *string { return &c.InternalAdvertisedAddr })
	add("FELIX_INTERNAL_ADVERTISED_ADDR", "internal-advertised-addr", "host:port peers dial for this broker (empty = FELIX_INTERNAL_BIND)", a, b)
	a, b = optionalAddr(func(c *Config) *string { return &c.AdvertisedAddr })
	add("FELIX_ADVERTISED_ADDR", "advertised-addr", "client host:port other brokers hand out in redirects (NotLeader) (empty = FELIX_QUIC_BIND)", a, b)
	a, b = str(func(c *Config) *string { return &c.InternalTLSCert })
	add("FELIX_INTERNAL_TLS_CERT", "internal-tls-cert", "internal mTLS certificate (PEM, DNS name = FELIX_NODE_ID, re-read every 30 s); all three FELIX_INTERNAL_TLS_* or none", a, b)
	a, b = str(func(c *Config) *string { return &c.InternalTLSKey })
	add("FELIX_INTERNAL_TLS_KEY", "internal-tls-key", "internal mTLS private key (PEM, re-read with the certificate)", a, b)
	a, b = str(func(c *Config) *string { return &c.InternalTLSCA })
	add("FELIX_INTERNAL_TLS_CA", "internal-tls-ca", "CA bundle peers' certificates must chain to (PEM, read once); unset trio = encrypted but unauthenticated, with a warning", a, b)
	add("FELIX_CLUSTER_PEERS", "cluster-peers", "static cluster (stand-in for the control plane): every broker as node_id=internal_host:port/client_host:port, comma-separated, this one included; needs FELIX_INTERNAL_BIND (empty = single node)",
		func(c *Config, v string) error {
			peers, err := ParseClusterPeers(v)
			c.ClusterPeers = peers
			return err
		}, func(c *Config) string { return formatPeers(c.ClusterPeers) })
	return append(s, controlPlaneSettings()...)
}

// controlPlaneSettings are the cluster-mode rows of settings().
func controlPlaneSettings() []setting {
	urls := func(c *Config, v string) error {
		c.ControlplaneURL, c.ControlPlane.URLs = strings.TrimSpace(v), nil
		for _, u := range strings.Split(c.ControlplaneURL, ",") {
			u = strings.TrimRight(strings.TrimSpace(u), "/")
			if u == "" {
				continue
			}
			if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
				return fmt.Errorf("want http://host:port member URLs, comma-separated: %q", u)
			}
			c.ControlPlane.URLs = append(c.ControlPlane.URLs, u)
		}
		return nil
	}
	tf, tg := str(func(c *Config) *string { return &c.ControlPlane.TokenFile })
	hs, hg := integer(func(c *Config) *int { return &c.ControlPlane.HeartbeatIntervalMS }, 100, 60000)
	ss, sg := integer(func(c *Config) *int { return &c.ControlPlane.SyncIntervalMS }, 100, 600000)
	return []setting{
		{env: "FELIX_CONTROLPLANE_URL", flag: "controlplane-url", def: "", set: urls,
			get:  func(c *Config) string { return strings.Join(c.ControlPlane.URLs, ",") },
			help: "cluster mode: control-plane member REST URLs (http://host:port, comma-separated); needs FELIX_INTERNAL_BIND and FELIX_NODE_ID; not with FELIX_CLUSTER_PEERS (empty = single node)"},
		{env: "FELIX_CONTROLPLANE_ADMIN_TOKEN_FILE", flag: "controlplane-admin-token-file", def: "", set: tf, get: tg,
			help: "file holding the control plane's admin token (its DATA_DIR/admin-token), sent on registration, heartbeats and forwarded admin writes (empty = none: a control plane with FELIX_AUTH=off)"},
		{env: "FELIX_CONTROLPLANE_HEARTBEAT_INTERVAL_MS", flag: "controlplane-heartbeat-interval-ms", def: "250", set: hs, get: hg,
			help: "heartbeat interval to the control plane (100..60000; with the control plane's defaults a broker is suspect after 3 missed and down after 6: raise FELIX_CONTROLPLANE_SUSPECT_AFTER_MS/_DOWN_AFTER_MS with it)"},
		{env: "FELIX_CONTROLPLANE_SYNC_INTERVAL_MS", flag: "controlplane-sync-interval-ms", def: "2000", set: ss, get: sg,
			help: "longest pause between attempts while the control plane is away (100..600000; the change feed is a long poll)"},
	}
}

// checkControlPlane refuses cluster mode without the internal transport's settings, and
// FELIX_CONTROLPLANE_URL together with FELIX_CLUSTER_PEERS (two sources of placement).
func (c *Config) checkControlPlane() error {
	if len(c.ControlPlane.URLs) == 0 {
		return nil
	}
	if len(c.ClusterPeers) > 0 {
		return fmt.Errorf("%w: FELIX_CLUSTER_PEERS and FELIX_CONTROLPLANE_URL are both set: a broker takes its placement from one (unset FELIX_CLUSTER_PEERS in cluster mode)", ErrConfig)
	}
	if c.InternalBind == "" || c.NodeID == "" {
		return fmt.Errorf("%w: FELIX_CONTROLPLANE_URL needs FELIX_INTERNAL_BIND and FELIX_NODE_ID (replicas and forwards travel over the internal transport)", ErrConfig)
	}
	return nil
}

// validateCluster applies the defaults that depend on other settings and refuses: some but
// not all FELIX_INTERNAL_TLS_* (naming the missing ones), an internal bind without a node id,
// and an internal bind on the client port (seed: the two roles bind different ports).
func (c *Config) validateCluster() error {
	if err := c.InternalTLSFiles().Check(); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if c.AdvertisedAddr == "" {
		c.AdvertisedAddr = c.QUICBind
	}
	if err := c.checkStaticCluster(); err != nil {
		return err
	}
	if err := c.checkControlPlane(); err != nil {
		return err
	}
	if c.InternalBind == "" {
		return nil
	}
	if c.NodeID == "" {
		return fmt.Errorf("%w: FELIX_INTERNAL_BIND=%s needs FELIX_NODE_ID (a valid DNS name: the identity peers check)", ErrConfig, c.InternalBind)
	}
	if c.InternalAdvertisedAddr == "" {
		c.InternalAdvertisedAddr = c.InternalBind
	}
	ip, iok := udpPort(c.InternalBind)
	qp, qok := udpPort(c.QUICBind)
	if iok && qok && ip != 0 && ip == qp {
		return fmt.Errorf("%w: FELIX_INTERNAL_BIND=%s shares port %d with FELIX_QUIC_BIND=%s; the internal and client roles must bind different ports",
			ErrConfig, c.InternalBind, ip, c.QUICBind)
	}
	return nil
}

// udpPort is the numeric port of a host:port already validated by addr.
func udpPort(hostport string) (int, bool) {
	_, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return 0, false
	}
	if n, err := strconv.Atoi(port); err == nil {
		return n, true
	}
	n, err := net.LookupPort("udp", port)
	return n, err == nil
}
