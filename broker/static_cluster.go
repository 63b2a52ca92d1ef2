package broker

// The static cluster (issue 19; the stand-in until issue 17's control plane fills the
// ownership table): FELIX_CLUSTER_PEERS lists every broker of the cluster, this one
// included, as node_id=internal_host:port/client_host:port; every broker then fills its
// ownership table from the same catalog with the same pure placement (StaticPlacement),
// so they all agree on who leads each shard without talking to each other. Streams and
// caches are created on every broker through its own admin API (the same spec on each).
// docs/operations.md, "Static cluster".

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"strings"

	"felix/cluster/transport"
	"felix/core"
)

// StaticPeer is one broker of a static cluster, one entry of FELIX_CLUSTER_PEERS: its node
// id (a DNS name, FELIX_NODE_ID of that broker), the internal host:port peers dial
// (its FELIX_INTERNAL_ADVERTISED_ADDR) and the client host:port a redirected client is
// sent to (its FELIX_ADVERTISED_ADDR).
type StaticPeer struct {
	NodeID       string
	InternalAddr string
	ClientAddr   string
}

// ErrPeers is wrapped by ParseClusterPeers' errors (the caller wraps them in ErrConfig
// naming FELIX_CLUSTER_PEERS).
var ErrPeers = errors.New("invalid cluster peer list")

// ParseClusterPeers parses FELIX_CLUSTER_PEERS: comma-separated
// node_id=internal_host:port/client_host:port entries (spaces around entries ignored).
// Node ids must be valid DNS names (transport.ValidNodeID) and distinct without case; both
// addresses host:port with a numeric port above 0. "" is no peers (nil, nil). Errors wrap
// ErrPeers and name the entry.
func ParseClusterPeers(v string) ([]StaticPeer, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []StaticPeer
	seen := map[string]bool{}
	for _, entry := range strings.Split(v, ",") {
		entry = strings.TrimSpace(entry)
		id, addrs, ok := strings.Cut(entry, "=")
		internal, client, ok2 := strings.Cut(addrs, "/")
		if !ok || !ok2 {
			return nil, fmt.Errorf("%w: entry %q: want node_id=internal_host:port/client_host:port", ErrPeers, entry)
		}
		if err := transport.ValidNodeID(id); err != nil {
			return nil, fmt.Errorf("%w: entry %q: node id: %v", ErrPeers, entry, err)
		}
		if seen[strings.ToLower(id)] {
			return nil, fmt.Errorf("%w: node id %q listed twice", ErrPeers, id)
		}
		seen[strings.ToLower(id)] = true
		for _, a := range []string{internal, client} {
			if err := dialableAddr(a); err != nil {
				return nil, fmt.Errorf("%w: entry %q: address %q: %v", ErrPeers, entry, a, err)
			}
		}
		out = append(out, StaticPeer{NodeID: id, InternalAddr: internal, ClientAddr: client})
	}
	return out, nil
}

// dialableAddr accepts host:port with a non-empty host and a numeric port 1..65535.
func dialableAddr(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	var n int
	if _, err := fmt.Sscanf(port, "%d", &n); err != nil || n < 1 || n > 65535 || fmt.Sprint(n) != port {
		return fmt.Errorf("port %q: want 1..65535", port)
	}
	if host == "" {
		return errors.New("empty host")
	}
	return nil
}

// formatPeers is the FELIX_CLUSTER_PEERS form of peers (--print-config).
func formatPeers(peers []StaticPeer) string {
	parts := make([]string, len(peers))
	for i, p := range peers {
		parts[i] = p.NodeID + "=" + p.InternalAddr + "/" + p.ClientAddr
	}
	return strings.Join(parts, ",")
}

// checkStaticCluster refuses FELIX_CLUSTER_PEERS without FELIX_INTERNAL_BIND, or without
// this node's FELIX_NODE_ID among the peers (ErrConfig naming the settings).
func (c *Config) checkStaticCluster() error {
	if len(c.ClusterPeers) == 0 {
		return nil
	}
	if c.InternalBind == "" {
		return fmt.Errorf("%w: FELIX_CLUSTER_PEERS is set but FELIX_INTERNAL_BIND is not: forwards travel over the internal transport", ErrConfig)
	}
	if _, ok := findPeer(c.ClusterPeers, c.NodeID); !ok {
		return fmt.Errorf("%w: FELIX_CLUSTER_PEERS does not list this broker's FELIX_NODE_ID=%q (list every broker, this one included)", ErrConfig, c.NodeID)
	}
	return nil
}

// findPeer returns the peer with node id id (compared without case).
func findPeer(peers []StaticPeer, id string) (StaticPeer, bool) {
	for _, p := range peers {
		if strings.EqualFold(p.NodeID, id) {
			return p, true
		}
	}
	return StaticPeer{}, false
}

// StaticPlacement is the ownership table of a static cluster, a pure function of the peers
// and the catalog: for every stream and cache of view, shard i is led by
// sorted[(fnv32(name)+i) mod n] (sorted: the node ids in ascending order, compared without case, n of them; name:
// "tenant/namespace/stream" or "tenant/namespace/cache"; fnv32: FNV-1a 32) with a replica
// set of the next R−1 peers in that order, at generation 0 and incarnation 0. R is 1: the
// catalog carries no replication factor yet (and nothing replicates), so every replica set
// is empty. Every broker computes the same table from the same catalog. No peers: an empty
// table.
func StaticPlacement(peers []StaticPeer, view CatalogView) Ownership {
	ids := make([]string, len(peers))
	for i, p := range peers {
		ids[i] = p.NodeID
	}
	slices.SortFunc(ids, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
	out := Ownership{}
	if len(ids) == 0 {
		return out
	}
	for _, st := range view.Streams("", "") {
		name := streamName(st.TenantID, st.Namespace, st.Stream)
		for i, a := range placeShards(ids, name.String(), int(st.Shards), 1) {
			out[core.ShardRef{Kind: core.ShardStream, Name: name, Shard: i}] = a
		}
	}
	for _, c := range view.Caches("", "") {
		for i, a := range placeShards(ids, c.TenantID+"/"+c.Namespace+"/"+c.Cache, int(c.Shards), 1) {
			out[cacheRef(c, i)] = a
		}
	}
	return out
}

// placeShards places shards shards of name over the sorted node ids with replication r
// (clamped to 1..len(sorted)): shard i's leader is sorted[(fnv32(name)+i) mod n], its
// replica set the next r−1 ids.
func placeShards(sorted []string, name string, shards, r int) []Assignment {
	n := len(sorted)
	r = min(max(r, 1), n)
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	base := int(h.Sum32() % uint32(n))
	out := make([]Assignment, shards)
	for i := range out {
		lead := (base + i) % n
		a := Assignment{Leader: sorted[lead]}
		for j := 1; j < r; j++ {
			a.ReplicaSet = append(a.ReplicaSet, sorted[(lead+j)%n])
		}
		out[i] = a
	}
	return out
}
