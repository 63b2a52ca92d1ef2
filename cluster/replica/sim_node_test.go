package replica

// The simulated replica of the seeded simulation (sim_world_test.go): one shard's stream log
// on a sim.Disk (framed records, fsynced vs not), its epochs and ballot files, the follower
// decider on every replication request, and, while placement has it lead, the leader of
// sim_leader_test.go. Everything in memory is rebuilt from the disk by newNode.

import (
	"encoding/binary"
	"fmt"
	"strings"

	"felix/cluster/sim"
	"felix/proto"
)

// ctl is a control message from outside (the test placement or a client).
type ctl uint8

const (
	ctlNone  ctl = iota
	ctlLead      // placement: lead at gen
	ctlPut       // client: write val
	ctlAcked     // to the client: acks
)

// simMsg is what travels between simulated nodes: an FLXI message (kind, m) or a control.
type simMsg struct {
	ctl  ctl
	gen  uint64
	val  uint64
	acks []ackedRecord
	kind proto.Kind
	m    proto.InternalMessage
}

// ackedRecord is a record a leader acknowledged (released): below its quorum mark.
type ackedRecord struct {
	offset uint64
	rec    string
	gen    uint64
}

func nodeName(id sim.NodeID) string { return "n" + id.String() }

// node is one replica.
type node struct {
	env    sim.Env
	w      *world
	log    [][]byte
	frames []int // byte offset of each record's frame in the log file
	synced int   // records fsynced
	epochs []Epoch
	ballot Ballot
	corr   uint64
	// answers waiting for the next fdatasync (the follower's group commit).
	waiting []sim.Envelope[simMsg]
	lead    *leader
	// compared is the decider's volatile FollowerState.Compared.
	compared Compared
}

// newNode is the sim.Factory: recovery from the disk that survived.
func newNode(w *world) sim.Factory[simMsg] {
	return func(env sim.Env) sim.Machine[simMsg] {
		n := &node{env: env, w: w}
		n.recover()
		return n
	}
}

// recover reads the log (cutting a torn tail), then the epochs (dropping entries past the
// recovered tail: their records were not fsynced) and the ballot.
func (n *node) recover() {
	f := n.env.Disk.File("log")
	f.Truncate(n.recoverRead())
	f.Sync()
	n.synced = len(n.log)
}

// recoverRead reads the whole records of the log file, the epochs and the ballot, and
// returns the length of the log's whole records (the rest is a torn tail).
func (n *node) recoverRead() int {
	b := n.env.Disk.File("log").Bytes()
	pos := 0
	for pos+4 <= len(b) {
		l := int(binary.BigEndian.Uint32(b[pos:]))
		if pos+4+l > len(b) {
			break
		}
		n.frames = append(n.frames, pos)
		n.log = append(n.log, append([]byte(nil), b[pos+4:pos+4+l]...))
		pos += 4 + l
	}
	n.readState()
	return pos
}

// readState reads the epochs (dropping entries past the recovered tail: their records
// were not fsynced) and the ballot.
func (n *node) readState() {
	eb := n.env.Disk.File("epochs").Bytes()
	for i := 0; i+16 <= len(eb); i += 16 {
		e := Epoch{Generation: binary.BigEndian.Uint64(eb[i:]), StartOffset: binary.BigEndian.Uint64(eb[i+8:])}
		if e.StartOffset < uint64(len(n.log)) {
			n.epochs = append(n.epochs, e)
		}
	}
	bb := n.env.Disk.File("ballot").Bytes()
	if len(bb) >= 8 {
		n.ballot = Ballot{Generation: binary.BigEndian.Uint64(bb), Leader: string(bb[8:])}
	}
}

// writeEpochs and writeBallot rewrite their file and sync it (atomic in the model: a crash
// falls between events).
func (n *node) writeEpochs(h []Epoch) {
	n.epochs = h
	f := n.env.Disk.File("epochs")
	f.Truncate(0)
	for _, e := range h {
		f.Append(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, e.Generation), e.StartOffset))
	}
	f.Sync()
}

func (n *node) writeBallot(b Ballot) {
	n.ballot = b
	f := n.env.Disk.File("ballot")
	f.Truncate(0)
	f.Append(append(binary.BigEndian.AppendUint64(nil, b.Generation), b.Leader...))
	f.Sync()
}

// appendRecords appends records at the tail (not yet fsynced).
func (n *node) appendRecords(recs [][]byte) {
	f := n.env.Disk.File("log")
	for _, r := range recs {
		n.frames = append(n.frames, f.Len())
		f.Append(binary.BigEndian.AppendUint32(nil, uint32(len(r))))
		f.Append(r)
		n.log = append(n.log, append([]byte(nil), r...))
	}
}

// truncate cuts the log to offset records (durable at once).
func (n *node) truncate(offset uint64) {
	if offset >= uint64(len(n.log)) {
		return
	}
	n.env.Disk.File("log").Truncate(n.frames[offset])
	n.log, n.frames = n.log[:offset], n.frames[:offset]
	n.synced = min(n.synced, int(offset))
}

// fsync makes the whole log durable and releases the answers waiting for it.
func (n *node) fsync() []sim.Envelope[simMsg] {
	n.env.Disk.File("log").Sync()
	n.synced = len(n.log)
	out := n.waiting
	n.waiting = nil
	return out
}

// ReadRecords implements Reader over the in-memory copy of the log.
func (n *node) ReadRecords(from, to uint64) ([][]byte, error) {
	if from > to || to > uint64(len(n.log)) {
		return nil, fmt.Errorf("read [%d, %d) of %d", from, to, len(n.log))
	}
	return n.log[from:to], nil
}

func (n *node) state() *FollowerState {
	return &FollowerState{Kind: ShardStream, Log: proto.LogStream, Member: true, HasLog: true,
		Tail: uint64(len(n.log)), Durable: uint64(n.synced), Epochs: n.epochs, Ballot: n.ballot, Records: n, Compared: n.compared, GenerationStart: n.w.generationStart()}
}

// Step handles one message.
func (n *node) Step(now sim.Time, from sim.NodeID, msg simMsg) []sim.Envelope[simMsg] {
	switch msg.ctl {
	case ctlLead:
		return n.startLeading(now, msg.gen)
	case ctlPut:
		n.put(msg.val)
		return nil
	}
	switch m := msg.m.(type) {
	case *proto.ReplicateRecords, *proto.ReplicateBootstrap, *proto.ReplicateRebuild, *proto.Fence:
		return n.follow(from, msg.kind, m)
	case *proto.ReplicateOk, *proto.ReplicateError, *proto.FenceOk, *proto.UnsupportedKind:
		if n.lead != nil {
			return n.lead.answer(n, now, from, m)
		}
	}
	return nil
}

// follow runs the decider and performs its action.
func (n *node) follow(from sim.NodeID, kind proto.Kind, m proto.InternalMessage) []sim.Envelope[simMsg] {
	d := DecideFollower(n.state(), nodeName(from), kind, m)
	if d.Ballot != nil {
		if n.lead != nil && d.Ballot.Generation > n.lead.gen {
			n.env.Logf("steps down: generation %d accepted from %s", d.Ballot.Generation, d.Ballot.Leader)
			n.lead = nil
		}
		n.writeBallot(*d.Ballot)
	}
	if d.Compared != nil {
		n.compared = *d.Compared
	}
	switch d.Action {
	case ActTruncateStore:
		n.env.Logf("%s", d.Reason)
		n.truncate(d.TruncateAt)
		fallthrough
	case ActStore:
		n.appendRecords(d.Store)
	case ActRebuild, ActPlace:
		n.truncate(d.PlaceAt)
	case ActConflict:
		n.env.Logf("halted: %s", d.Reason)
	}
	if d.Epochs != nil {
		n.writeEpochs(d.Epochs)
	}
	env := sim.Envelope[simMsg]{To: from, Msg: simMsg{kind: d.Answer.Kind(), m: d.Answer}}
	if d.Sync {
		n.waiting = append(n.waiting, env)
		return nil
	}
	return []sim.Envelope[simMsg]{env}
}

// Tick: the group commit (fsync, then the answers waiting for it), then the leader's work.
func (n *node) Tick(now sim.Time) []sim.Envelope[simMsg] {
	var out []sim.Envelope[simMsg]
	if n.synced < len(n.log) || len(n.waiting) > 0 {
		out = n.fsync()
	}
	if n.lead != nil {
		out = append(out, n.lead.tick(n, now)...)
	}
	return out
}

// lastLabel is the log's position for the placement rule: its newest generation and tail.
func (n *node) lastLabel() (uint64, uint64) {
	g := uint64(0)
	if e, ok := lastEpoch(n.epochs); ok {
		g = e.Generation
	}
	return g, uint64(len(n.log))
}

// Status renders the node for scripts: ballot, epochs, log.
func (n *node) Status() string {
	recs := make([]string, len(n.log))
	for i, r := range n.log {
		recs[i] = string(r)
	}
	role := "follower"
	if n.lead != nil {
		role = n.lead.status()
	}
	return fmt.Sprintf("%s ballot=%d:%s epochs=%s log=[%s] synced=%d", role, n.ballot.Generation,
		n.ballot.Leader, fmtEpochs(n.epochs), strings.Join(recs, " "), n.synced)
}
