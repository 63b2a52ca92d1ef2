package broker

// The control plane's state as a broker in cluster mode holds it (controlplane.go): the
// mirror of GET /v1/snapshot plus the feed rows applied since, and what follows from it:
// the ownership table (the assignments), the peers' internal and client addresses (the
// registered brokers: replication and forwarding), and the file catalog brought to it (syncCatalog). A broker never deletes data
// because a name is absent: only a tombstone removes (meta.Removals' rule; issue 17 item 2).

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"felix/cluster/meta"
	"felix/cluster/meta/metaclient"
	"felix/core"
)

// cpMirror is the control plane's catalog, placement, brokers and features at seq, in the
// feed's epoch. Keys are the feed's (tenant; tenant/ns; tenant/ns/name; kind/tenant/ns/name
// for tombstones; the shard key for assignments; the node id; the feature name).
type cpMirror struct {
	epoch, seq  uint64
	tenants     map[string]meta.Tenant
	namespaces  map[string]meta.Namespace
	streams     map[string]meta.Stream
	caches      map[string]meta.Cache
	tombstones  map[string]meta.Tombstone
	assignments map[string]meta.Assignment
	brokers     map[string]meta.Broker
	features    map[string]meta.FeatureState
}

func newMirror() *cpMirror {
	return &cpMirror{tenants: map[string]meta.Tenant{}, namespaces: map[string]meta.Namespace{},
		streams: map[string]meta.Stream{}, caches: map[string]meta.Cache{}, tombstones: map[string]meta.Tombstone{},
		assignments: map[string]meta.Assignment{}, brokers: map[string]meta.Broker{}, features: map[string]meta.FeatureState{}}
}

// mirrorOf is the mirror of a snapshot.
func mirrorOf(s metaclient.Snapshot) *cpMirror {
	m := newMirror()
	m.epoch, m.seq = s.Epoch, s.Seq
	for _, t := range s.Tenants {
		m.tenants[t.TenantID] = t
	}
	for _, n := range s.Namespaces {
		m.namespaces[n.TenantID+"/"+n.Namespace] = n
	}
	for _, st := range s.Streams {
		m.streams[st.TenantID+"/"+st.Namespace+"/"+st.Stream] = st
	}
	for _, c := range s.Caches {
		m.caches[c.TenantID+"/"+c.Namespace+"/"+c.Cache] = c
	}
	for _, t := range s.Tombstones {
		m.tombstones[t.Kind+"/"+t.TenantID+"/"+t.Namespace+"/"+t.Name] = t
	}
	for _, a := range s.Assignments {
		m.assignments[a.Key()] = a
	}
	for _, b := range s.Brokers {
		m.brokers[b.NodeID] = b
	}
	for _, f := range s.Features {
		m.features[f.Name] = f
	}
	return m
}

// apply applies one feed row: an upsert decodes the value into the entity's row, a delete
// drops the key. Rows of entities a broker does not hold (member) and unknown entities are
// skipped (additive REST). Errors: a value that does not decode (the row is skipped).
func (m *cpMirror) apply(ch metaclient.Change) error {
	switch ch.Entity {
	case "tenant":
		return upsertRow(m.tenants, ch)
	case "namespace":
		return upsertRow(m.namespaces, ch)
	case "stream":
		return upsertRow(m.streams, ch)
	case "cache":
		return upsertRow(m.caches, ch)
	case "tombstone":
		return upsertRow(m.tombstones, ch)
	case "assignment":
		return upsertRow(m.assignments, ch)
	case "broker":
		return upsertRow(m.brokers, ch)
	case "feature":
		return upsertRow(m.features, ch)
	}
	return nil
}

func upsertRow[V any](table map[string]V, ch metaclient.Change) error {
	if ch.Op == meta.OpDelete {
		delete(table, ch.Key)
		return nil
	}
	var v V
	if err := json.Unmarshal(ch.Value, &v); err != nil {
		return err
	}
	table[ch.Key] = v
	return nil
}

// ownership is the ownership table of the assignments: leader, followers as the replica
// set, generation and incarnation per shard.
func (m *cpMirror) ownership() Ownership {
	out := make(Ownership, len(m.assignments))
	for _, a := range m.assignments {
		kind := core.ShardStream
		if a.Kind == "cache" {
			kind = core.ShardCache
		}
		ref := core.ShardRef{Kind: kind, Name: core.StreamName{Tenant: a.TenantID, Namespace: a.Namespace, Stream: a.Name},
			Shard: int(a.Shard)}
		out[ref] = Assignment{Leader: a.Leader, ReplicaSet: append([]string(nil), a.Followers...),
			Generation: a.Generation, Incarnation: a.Incarnation}
	}
	return out
}

// peers maps every registered broker's node id to its internal advertised address.
func (m *cpMirror) peers() map[string]string {
	out := make(map[string]string, len(m.brokers))
	for id, b := range m.brokers {
		out[id] = b.InternalAddr
	}
	return out
}

// nodes is every registered broker as forwarding names it (node id, internal and client
// advertised addresses), in node id order.
func (m *cpMirror) nodes() []StaticPeer {
	out := make([]StaticPeer, 0, len(m.brokers))
	for _, b := range m.brokers {
		out = append(out, StaticPeer{NodeID: b.NodeID, InternalAddr: b.InternalAddr, ClientAddr: b.ClientAddr})
	}
	slices.SortFunc(out, func(a, b StaticPeer) int { return strings.Compare(a.NodeID, b.NodeID) })
	return out
}

// tombstoned reports whether a tombstone covers h (meta.Removals' rule: one at or above
// the incarnation held, and no live row of that name at that incarnation).
func (m *cpMirror) tombstoned(h meta.Held) bool {
	key := h.TenantID + "/" + h.Namespace + "/" + h.Name
	tomb, ok := m.tombstones[h.Kind+"/"+key]
	if !ok || tomb.Incarnation < h.Incarnation {
		return false
	}
	if h.Kind == "stream" {
		st, live := m.streams[key]
		return !live || st.Incarnation != h.Incarnation
	}
	c, live := m.caches[key]
	return !live || c.Incarnation != h.Incarnation
}

// syncCatalog brings the file catalog to m: missing tenants, namespaces, streams and
// caches are created (the reconciler then opens the shards the table gives this broker);
// a stream or cache the catalog holds that m tombstones is deleted with its data
// (ApplyDelete); one merely absent from m is kept, and logged; dropped names the tenants
// and namespaces a feed row deleted ("tenant/T", "namespace/T/NS"), removed once empty.
// Held incarnations are 0: this build does not implement stream_incarnations.
func (cp *controlPlane) syncCatalog(m *cpMirror, dropped []string) {
	cat, log := cp.s.catalog, cp.s.log
	note := func(what string, err error) {
		if err != nil && !errors.Is(err, ErrExists) {
			log.Warn("control-plane catalog: "+what+" not installed here", "err", err)
		}
	}
	for _, t := range m.tenants {
		if _, err := cat.Tenant(t.TenantID); errors.Is(err, ErrNotFound) {
			note("tenant "+t.TenantID, cat.CreateTenant(Tenant{TenantID: t.TenantID, DisplayName: t.DisplayName}))
		}
	}
	for _, n := range m.namespaces {
		if _, err := cat.Namespace(n.TenantID, n.Namespace); errors.Is(err, ErrNotFound) {
			note("namespace "+n.TenantID+"/"+n.Namespace, cat.CreateNamespace(Namespace{TenantID: n.TenantID,
				Namespace: n.Namespace, DisplayName: n.DisplayName}))
		}
	}
	for key, st := range m.streams {
		if _, err := cat.Stream(st.TenantID, st.Namespace, st.Stream); errors.Is(err, ErrNotFound) {
			var s Stream
			err := convertJSON(st, &s)
			if err == nil {
				_, err = cat.CreateStream(s, nil)
			}
			note("stream "+key, err)
		}
	}
	for key, c := range m.caches {
		if _, err := cat.Cache(c.TenantID, c.Namespace, c.Cache); errors.Is(err, ErrNotFound) {
			var x Cache
			err := convertJSON(c, &x)
			if err == nil {
				_, err = cat.CreateCache(x, nil)
			}
			note("cache "+key, err)
		}
	}
	cp.removeTombstoned(m)
	cp.dropEmpty(dropped)
}

// removeTombstoned deletes, with their data, the catalog's streams and caches m
// tombstones; the others m does not name are kept (logged once per name).
func (cp *controlPlane) removeTombstoned(m *cpMirror) {
	cat := cp.s.catalog
	type held struct {
		meta.Held
		live   bool
		remove func() error
	}
	var all []held
	for _, st := range cat.Streams("", "") {
		_, live := m.streams[st.TenantID+"/"+st.Namespace+"/"+st.Stream]
		all = append(all, held{Held: meta.Held{Kind: "stream", TenantID: st.TenantID, Namespace: st.Namespace, Name: st.Stream},
			live: live, remove: func() error { return cat.DeleteStream(st.TenantID, st.Namespace, st.Stream, cp.s.ApplyDelete) }})
	}
	for _, c := range cat.Caches("", "") {
		_, live := m.caches[c.TenantID+"/"+c.Namespace+"/"+c.Cache]
		all = append(all, held{Held: meta.Held{Kind: "cache", TenantID: c.TenantID, Namespace: c.Namespace, Name: c.Cache},
			live: live, remove: func() error { return cat.DeleteCache(c.TenantID, c.Namespace, c.Cache, cp.s.ApplyDeleteCache) }})
	}
	for _, h := range all {
		what := h.Kind + " " + h.TenantID + "/" + h.Namespace + "/" + h.Name
		switch {
		case h.live:
		case !m.tombstoned(h.Held):
			cp.keepAbsent(what)
		default:
			if err := h.remove(); err != nil {
				cp.s.log.Warn("control-plane catalog: tombstoned "+what+" not removed here", "err", err)
			}
		}
	}
}

// keepAbsent logs, once per name, a stream or cache held here that the control plane
// does not name and does not tombstone: its data stays (it is served only if the control
// plane assigns it again).
func (cp *controlPlane) keepAbsent(what string) {
	if cp.absent == nil {
		cp.absent = map[string]bool{}
	}
	if !cp.absent[what] {
		cp.absent[what] = true
		cp.s.log.Warn("control-plane catalog: " + what + " is held here but absent from the control plane, without a tombstone: its data is kept")
	}
}

// dropEmpty removes the tenants and namespaces a feed row deleted, once nothing of them is
// left here (a kept absent stream keeps its namespace).
func (cp *controlPlane) dropEmpty(dropped []string) {
	cat := cp.s.catalog
	for _, d := range dropped { // namespaces first: a tenant goes once its namespaces went
		if rest, ok := strings.CutPrefix(d, "namespace/"); ok {
			t, ns, _ := strings.Cut(rest, "/")
			if err := cat.DeleteNamespace(t, ns); err != nil && !errors.Is(err, ErrNotFound) {
				cp.s.log.Info("control-plane catalog: namespace kept here", "namespace", rest, "err", err)
			}
		}
	}
	for _, d := range dropped {
		if t, ok := strings.CutPrefix(d, "tenant/"); ok {
			if err := cat.DeleteTenant(t); err != nil && !errors.Is(err, ErrNotFound) {
				cp.s.log.Info("control-plane catalog: tenant kept here", "tenant", t, "err", err)
			}
		}
	}
}

// convertJSON moves a control-plane row into the broker's shape through JSON (the shapes
// share their field names; fields only one side has are ignored).
func convertJSON(from, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, to); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}
