package broker

// The broker-internal transport settings (issue 16; seeds/internal-protocol.txt, "Why it is a
// separate protocol" and "The transport"; spec/config.md §3 PROPOSED names). Server starts
// the internal listener and pool from them when FELIX_INTERNAL_BIND is set (internal.go).

import (
	"fmt"
	"net"
	"strconv"

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
	return s
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
