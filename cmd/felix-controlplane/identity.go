package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/raft"

	"felix/cluster/meta"
	"felix/cluster/meta/raftnode"
	"felix/cluster/meta/rest"
)

// Bootstrap with FELIX_CONTROLPLANE_PEERS (docs/controlplane.md, "Raft"):
// a member whose data dir holds no Raft state learns every peer's storage
// identity before it bootstraps, from GET /v1/identity at the peer's
// FELIX_CONTROLPLANE_PEER_URLS entry (served from the moment a member
// starts). It bootstraps the group of NODE_ID/STORAGE_ID servers at the
// PEERS addresses only once every peer answered and none holds Raft state;
// if one does, the group already ran, so this member is an initial voter
// the leader will feed (its id is in the group's configuration) or a member
// that lost its disk (a new server: the operator removes the old id and adds
// this one). It never bootstraps while a peer has not answered, so a wiped
// member cannot start a group of its own, nor vote as the server it was.

// discoverPoll is how often the peers are asked again while one is silent.
const discoverPoll = 200 * time.Millisecond

// level is the metadata level this member reports: the build's, or
// FELIX_TEST_METADATA_LEVEL's.
func (m *member) level() meta.Level {
	if m.cfg.level != 0 {
		return m.cfg.level
	}
	return meta.BuildMaxLevel
}

// ownIdentity is this member's answer at GET /v1/identity before its Raft
// starts.
func (m *member) ownIdentity() rest.IdentityBody {
	node, storage := raftnode.SplitServerID(m.serverID)
	return rest.IdentityBody{NodeID: node, StorageID: storage, ServerID: string(m.serverID), Level: m.level(),
		RaftAddr: m.cfg.raftBind, HasState: m.hasState, KeyFingerprint: m.keys.Fingerprint()}
}

// bootstrapServers decides the group to bootstrap: nil when the data dir
// holds state or a peer does (start without bootstrapping), this member alone
// without peers, else every peer's server id once all answered. Errors:
// ctx's (SIGTERM while waiting), a peer answering under another node id.
func (m *member) bootstrapServers(ctx context.Context) ([]raft.Server, error) {
	self := raft.Server{Suffrage: raft.Voter, ID: m.serverID, Address: raft.ServerAddress(m.cfg.raftBind)}
	switch {
	case m.hasState:
		return nil, nil
	case len(m.cfg.peers) == 0 || len(m.cfg.peers) == 1 && m.cfg.peers[0].id == m.cfg.nodeID:
		if len(m.cfg.peers) == 1 {
			self.Address = raft.ServerAddress(m.cfg.peers[0].addr)
		}
		return []raft.Server{self}, nil
	}
	lastLog := time.Time{}
	for {
		servers, decided, err := m.askPeers(ctx)
		if err != nil || decided {
			return servers, err
		}
		if time.Since(lastLog) > 5*time.Second {
			m.log.Info("waiting for every peer's identity before bootstrapping the group", "peers", len(m.cfg.peers))
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(discoverPoll):
		}
	}
}

// askPeers asks every peer once: decided with the servers when all answered
// without state, decided with nil when one holds state. Once decided it warns
// of a peer holding another tenant-key secret.
func (m *member) askPeers(ctx context.Context) (servers []raft.Server, decided bool, err error) {
	var idents []rest.IdentityBody
	for _, p := range m.cfg.peers {
		ident := m.ownIdentity()
		if p.id != m.cfg.nodeID {
			if ident, err = rest.FetchIdentity(ctx, identityClient, m.memberURL(raft.ServerID(p.id))); err != nil {
				return nil, false, nil
			}
		}
		if ident.NodeID != p.id || ident.StorageID == "" {
			return nil, true, fmt.Errorf("peer %s answers as node %q storage %q at its FELIX_CONTROLPLANE_PEER_URLS entry", p.id,
				ident.NodeID, ident.StorageID)
		}
		idents = append(idents, ident)
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(ident.ServerID), Address: raft.ServerAddress(p.addr)})
	}
	for _, ident := range idents {
		if ident.KeyFingerprint != m.keys.Fingerprint() {
			m.log.Warn("a peer holds another tenant-key secret: the members will publish different JWKS; copy one "+
				rest.KeySecretFile+" file to every member", "peer", ident.ServerID)
		}
		if ident.HasState {
			m.log.Info("a peer already holds Raft state: starting without bootstrapping (fed by the leader, or added by the operator)",
				"peer", ident.ServerID, "server_id", string(m.serverID))
			servers = nil
		}
	}
	return servers, true, nil
}

// identityClient bounds each identity request.
var identityClient = &http.Client{Timeout: time.Second}
