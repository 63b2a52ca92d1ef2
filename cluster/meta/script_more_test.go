package meta

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/cockroachdb/datadriven"
)

// ref parses "kind/t/ns/name/shard".
func ref(d *datadriven.TestData) ShardRef {
	p := strings.Split(pos(d), "/")
	if len(p) != 5 {
		scriptFail(d, "shard %q: kind/tenant/namespace/name/shard", pos(d))
	}
	n, err := strconv.Atoi(p[4])
	if err != nil {
		scriptFail(d, "shard %q: %v", pos(d), err)
	}
	return ShardRef{Kind: p[0], TenantID: p[1], Namespace: p[2], Name: p[3], Shard: uint32(n)}
}

func (h *harness) cmdReport(d *datadriven.TestData) string {
	c := &ReplicaReport{ShardRef: ref(d), Leader: arg(d, "leader", ""), Generation: uint64(num(d, "gen", 0)), AtMs: ms(d, "at")}
	for _, r := range list(d, "replicas") {
		node, off, _ := strings.Cut(r, ":")
		o, _ := strconv.ParseUint(off, 10, 64)
		c.Replicas = append(c.Replicas, ReplicaState{NodeID: node, StorageID: "sid-" + node, DurableOffset: o})
	}
	res, out := h.propose(c)
	if out != "" {
		return out
	}
	r := res.Value.(Report)
	var b strings.Builder
	fmt.Fprintf(&b, "report %s leader=%s leader-inc=%d gen=%d stamped=%v", r.Key(), r.Leader, r.LeaderIncarnation, r.Generation, r.Stamped)
	for _, rep := range r.Replicas {
		fmt.Fprintf(&b, "\n  %s storage=%q inc=%d durable_offset=%d", rep.NodeID, rep.StorageID, rep.Incarnation, rep.DurableOffset)
	}
	return h.okOr("", "%s", b.String())
}

func (h *harness) cmdAssign(d *datadriven.TestData) string {
	c := &SetAssignment{ShardRef: ref(d), Leader: arg(d, "leader", ""), Followers: list(d, "followers"),
		Generation: uint64(num(d, "gen", 0))}
	_, out := h.propose(c)
	return h.okOr(out, "%s", h.placementOf(c.Key()))
}

func (h *harness) cmdBrokers(d *datadriven.TestData) string {
	var b strings.Builder
	for _, br := range h.fsm.state.Brokers() {
		fmt.Fprintf(&b, "%s %s inc=%d storage=%q features=%v\n", br.NodeID,
			BrokerState(br, ms(d, "at"), h.fsm.cfg.LivenessTimeout), br.Incarnation, br.StorageID, br.Features)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (h *harness) cmdState(d *datadriven.TestData) string {
	s := h.fsm.state
	var b strings.Builder
	fmt.Fprintf(&b, "index=%d floor=%d epoch=%d new=%v meta=%+v\n", s.Index(), s.Floor(), h.fsm.Epoch(), IsNewCluster(s), s.Meta())
	fmt.Fprintf(&b, "tenants=%d namespaces=%d streams=%d caches=%d brokers=%d assignments=%d reports=%d\n",
		len(s.Tenants()), len(s.Namespaces()), len(s.Streams()), len(s.Caches()), len(s.Brokers()),
		len(s.Assignments()), len(s.Reports()))
	for _, st := range s.Streams() {
		fmt.Fprintf(&b, "stream %s/%s/%s inc=%d\n", st.TenantID, st.Namespace, st.Stream, st.Incarnation)
	}
	for _, c := range s.Caches() {
		fmt.Fprintf(&b, "cache %s/%s/%s inc=%d\n", c.TenantID, c.Namespace, c.Cache, c.Incarnation)
	}
	for _, tb := range s.Tombstones() {
		fmt.Fprintf(&b, "tombstone %s %s/%s/%s inc=%d at %d\n", tb.Kind, tb.TenantID, tb.Namespace, tb.Name, tb.Incarnation, tb.DeletedIndex)
	}
	fmt.Fprintf(&b, "enabled=%v", featureNames(s))
	return b.String()
}

func (h *harness) cmdSnapshot(d *datadriven.TestData) string {
	data, err := h.fsm.Snapshot().Encode()
	if err != nil {
		return "error: " + err.Error()
	}
	h.snaps[pos(d)] = data
	return fmt.Sprintf("snapshot %s: index %d epoch %d, %d bytes, %d records", pos(d), h.fsm.state.Index(),
		h.fsm.Epoch(), len(data), binary.BigEndian.Uint32(data[24:]))
}

func (h *harness) cmdRestore(d *datadriven.TestData) string {
	if err := h.fsm.Restore(h.snaps[pos(d)]); err != nil {
		return "refused: " + err.Error()
	}
	h.index = max(h.index, h.fsm.state.Index())
	return fmt.Sprintf("restored %s: index %d epoch %d", pos(d), h.fsm.state.Index(), h.fsm.Epoch())
}

// cmdCorrupt saves a damaged copy: byte=N flips bit 0 of byte N (and, with
// fix-crc, recomputes the checksum so a later check sees it); type=N
// rewrites the first record's type.
func (h *harness) cmdCorrupt(d *datadriven.TestData) string {
	data := append([]byte(nil), h.snaps[pos(d)]...)
	if n := num(d, "byte", -1); n >= 0 {
		data[n] ^= 1
	}
	if n := num(d, "type", -1); n >= 0 {
		binary.BigEndian.PutUint16(data[SnapshotHeaderLen:], uint16(n))
	}
	if n := num(d, "version", -1); n >= 0 {
		binary.BigEndian.PutUint16(data[4:], uint16(n))
	}
	if arg(d, "fix-crc", "") != "" {
		crc := crcOf(data[:32], data[SnapshotHeaderLen:])
		binary.BigEndian.PutUint32(data[32:], crc)
	}
	h.snaps[arg(d, "as", pos(d))] = data
	return "corrupted copy saved as " + arg(d, "as", pos(d))
}

func (h *harness) cmdFeed(d *datadriven.TestData) string {
	p, err := h.fsm.Changes(uint64(num(d, "after", 0)), num(d, "max", 0))
	if err != nil {
		return fmt.Sprintf("%d: %v", StatusOf(err), err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d last %d", p.Epoch, p.Last)
	for _, c := range p.Changes {
		fmt.Fprintf(&b, "\n%d %s %s %s", c.Seq, c.Op, c.Entity, c.Key)
	}
	return b.String()
}

func (h *harness) cmdRaw(d *datadriven.TestData) string {
	entry := binary.BigEndian.AppendUint16(nil, uint16(num(d, "kind", 0)))
	entry = binary.BigEndian.AppendUint16(entry, uint16(num(d, "level", 1)))
	entry = append(entry, strings.TrimSpace(d.Input)...)
	_, out := h.apply(entry)
	return h.okOr(out, "applied")
}

func (h *harness) cmdAddMember(d *datadriven.TestData) string {
	_, rep := d.Arg("level")
	err := CheckAddMember(h.fsm.state.Floor(), pos(d), Level(num(d, "level", 0)), rep)
	if err != nil {
		return fmt.Sprintf("refused %d: %v", StatusOf(err), err)
	}
	return "may join"
}

func (h *harness) cmdHold(d *datadriven.TestData) string {
	_, rep := d.Arg("level")
	ev := Evidence{Level: Level(num(d, "level", 0)), Reported: rep, LostLog: arg(d, "lost-log", "") != ""}
	a := h.holds.Observe(pos(d), h.fsm.state.Floor(), ev)
	return fmt.Sprintf("%s; felix_meta_raft_member_below_floor{member=%q}=%d; held=%v", a, pos(d),
		map[bool]int{false: 0, true: 1}[h.holds.Held(pos(d))], h.holds.HeldMembers())
}

func (h *harness) cmdCheckWrite(d *datadriven.TestData) string {
	err := CheckWriteLevel(h.fsm.state, h.voters, arg(d, "what", "write"), Level(num(d, "level", 1)))
	if err != nil {
		return fmt.Sprintf("refused %d: %v", StatusOf(err), err)
	}
	return "allowed"
}

func (h *harness) cmdConflict(d *datadriven.TestData) string {
	_, answered := d.Arg("level")
	st := h.holds.Conflict(pos(d), h.fsm.state.Floor(), ms(d, "started"), ms(d, "at"),
		ProbeAnswer{Answered: answered, Level: Level(num(d, "level", 0))})
	return fmt.Sprintf("%s try=%d; held=%v", st.Action, st.Try, h.holds.HeldMembers())
}

// cmdProposeStream encodes a create-stream (create-stream's arguments) for
// the voters and keeps the entry under as=NAME without applying it, so a
// script can apply other entries first: what a proposal racing a finalize
// meets (apply NAME applies it).
func (h *harness) cmdProposeStream(d *datadriven.TestData) string {
	entry, err := h.fsm.Propose(streamCommand(d), h.voters)
	if err != nil {
		return fmt.Sprintf("propose refused %d: %v", StatusOf(err), err)
	}
	if h.kept == nil {
		h.kept = map[string][]byte{}
	}
	h.kept[arg(d, "as", "")] = entry
	return fmt.Sprintf("kept as %s: level %d body %s", arg(d, "as", ""), binary.BigEndian.Uint16(entry[2:4]), entry[EntryHeaderLen:])
}

// cmdApply applies the entry kept under NAME at the next index.
func (h *harness) cmdApply(d *datadriven.TestData) string {
	entry, ok := h.kept[pos(d)]
	if !ok {
		scriptFail(d, "apply: no entry kept as %q", pos(d))
	}
	delete(h.kept, pos(d))
	res, out := h.apply(entry)
	if out != "" {
		return out
	}
	if v, ok := res.Value.(Stream); ok {
		return h.okOr("", "stream %s/%s/%s routing=%s; floor %d", v.TenantID, v.Namespace, v.Stream, v.Routing, h.fsm.state.Floor())
	}
	return h.okOr("", "applied")
}
