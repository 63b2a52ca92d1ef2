package placement

// The simulated replica of the seeded simulation (sim_world_test.go): one stream shard's
// log on a sim.Disk (every write fsynced at once, as on_commit), its epochs and ballot, the
// follower decider of cluster/replica on every replication request and fence, heartbeats
// to the placement node, and, while placement has it lead, the leader of
// sim_leader_test.go. Its clock may run slow (world.rate): everything it computes from
// time, its lease above all, uses local().

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"felix/cluster/replica"
	"felix/cluster/sim"
	"felix/proto"
)

// mkind says what a simulated message is.
type mkind uint8

const (
	kPut       mkind = iota + 1 // client → replica: write val
	kAck                        // replica → client: val acknowledged at off
	kGet                        // client → replica: read id
	kGot                        // replica → client: read id answered val (err when refused)
	kRepl                       // FLXI between replicas: pk, m (and last, a FenceOk's last generation)
	kHeartbeat                  // replica → placement
	kGrant                      // placement → replica: lease at gen for the heartbeat sent at local
	kLead                       // placement → replica: lead at gen
	kRefusal                    // replica → placement: a fence refusal
)

type msg struct {
	k     mkind
	val   uint64
	off   uint64
	id    uint64
	err   string
	gen   uint64
	pk    proto.Kind
	m     proto.InternalMessage
	last  uint64
	local int64
	hb    *heartbeat
	ref   *FenceRefusal
}

// heartbeat is what a replica tells placement: the highest generation it accepted (its
// ballot), whether it leads and serves at gen, and, when it does, its replica report.
type heartbeat struct {
	ballot  uint64
	leading uint64
	report  *Report
}

const placementNode sim.NodeID = 4

func name(id sim.NodeID) string { return "n" + id.String() }

func nodeOf(n string) sim.NodeID {
	v, _ := strconv.ParseUint(n[1:], 10, 32)
	return sim.NodeID(v)
}

// rnode is one replica.
type rnode struct {
	env      sim.Env
	w        *world
	log      [][]byte
	frames   []int
	epochs   []replica.Epoch
	ballot   replica.Ballot
	compared replica.Compared
	corr     uint64
	lead     *leading
	refused  uint64 // a generation this node refused to open at
	lease    Lease
	lastBeat sim.Time
}

func newReplica(w *world) sim.Factory[msg] {
	return func(env sim.Env) sim.Machine[msg] {
		if env.ID == placementNode {
			return newPlacement(w, env)
		}
		n := &rnode{env: env, w: w}
		n.recover()
		return n
	}
}

// local is the node's own clock: virtual time at the node's rate.
func (n *rnode) local(now sim.Time) int64 { return n.w.local(n.env.ID, now) }

// recover reads the log, the epochs and the ballot back from the disk.
func (n *rnode) recover() {
	b := n.env.Disk.File("log").Bytes()
	for pos := 0; pos+4 <= len(b); {
		l := int(binary.BigEndian.Uint32(b[pos:]))
		n.frames = append(n.frames, pos)
		n.log = append(n.log, append([]byte(nil), b[pos+4:pos+4+l]...))
		pos += 4 + l
	}
	eb := n.env.Disk.File("epochs").Bytes()
	for i := 0; i+16 <= len(eb); i += 16 {
		n.epochs = append(n.epochs, replica.Epoch{Generation: binary.BigEndian.Uint64(eb[i:]),
			StartOffset: binary.BigEndian.Uint64(eb[i+8:])})
	}
	if bb := n.env.Disk.File("ballot").Bytes(); len(bb) >= 8 {
		n.ballot = replica.Ballot{Generation: binary.BigEndian.Uint64(bb), Leader: string(bb[8:])}
	}
}

func (n *rnode) writeEpochs(h []replica.Epoch) {
	n.epochs = h
	f := n.env.Disk.File("epochs")
	f.Truncate(0)
	for _, e := range h {
		f.Append(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, e.Generation), e.StartOffset))
	}
	f.Sync()
}

func (n *rnode) writeBallot(b replica.Ballot) {
	n.ballot = b
	f := n.env.Disk.File("ballot")
	f.Truncate(0)
	f.Append(append(binary.BigEndian.AppendUint64(nil, b.Generation), b.Leader...))
	f.Sync()
}

// appendRecords appends and fsyncs records at the tail.
func (n *rnode) appendRecords(recs [][]byte) {
	f := n.env.Disk.File("log")
	for _, r := range recs {
		n.frames = append(n.frames, f.Len())
		f.Append(binary.BigEndian.AppendUint32(nil, uint32(len(r))))
		f.Append(r)
		n.log = append(n.log, append([]byte(nil), r...))
	}
	f.Sync()
}

func (n *rnode) truncate(offset uint64) {
	if offset >= uint64(len(n.log)) {
		return
	}
	f := n.env.Disk.File("log")
	f.Truncate(n.frames[offset])
	f.Sync()
	n.log, n.frames = n.log[:offset], n.frames[:offset]
	n.writeEpochs(cutEpochs(n.epochs, offset))
}

func cutEpochs(h []replica.Epoch, offset uint64) []replica.Epoch {
	var out []replica.Epoch
	for _, e := range h {
		if e.StartOffset < offset {
			out = append(out, e)
		}
	}
	return out
}

// ReadRecords implements replica.Reader.
func (n *rnode) ReadRecords(from, to uint64) ([][]byte, error) {
	if from > to || to > uint64(len(n.log)) {
		return nil, fmt.Errorf("read [%d, %d) of %d", from, to, len(n.log))
	}
	return n.log[from:to], nil
}

// position is the node's position on its stream log.
func (n *rnode) position() Position {
	p := Position{Durable: uint64(len(n.log))}
	if len(n.epochs) > 0 {
		p.LastGeneration = n.epochs[len(n.epochs)-1].Generation
	}
	return p
}

func parseGenerationStart(p []byte) (uint64, bool) {
	if len(p) < 2 || p[0] != 'g' {
		return 0, false
	}
	g, err := strconv.ParseUint(string(p[1:]), 10, 64)
	return g, err == nil
}

// follow runs cluster/replica's decider and performs its action: the fence a replica
// took at G refuses every lower generation (FencedEpoch) there, not here.
func (n *rnode) follow(from sim.NodeID, pk proto.Kind, m proto.InternalMessage) []sim.Envelope[msg] {
	st := &replica.FollowerState{Kind: proto.ShardStream, Log: proto.LogStream, Member: true, HasLog: true,
		Tail: uint64(len(n.log)), Durable: uint64(len(n.log)), Epochs: n.epochs, Ballot: n.ballot, Records: n,
		Compared: n.compared, GenerationStart: parseGenerationStart}
	d := replica.DecideFollower(st, name(from), pk, m)
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
	case replica.ActTruncateStore:
		n.env.Logf("%s", d.Reason)
		n.truncate(d.TruncateAt)
		n.appendRecords(d.Store)
	case replica.ActStore:
		n.appendRecords(d.Store)
	}
	if d.Epochs != nil {
		n.writeEpochs(d.Epochs)
	}
	out := msg{k: kRepl, pk: d.Answer.Kind(), m: d.Answer}
	if d.Action == replica.ActFenceOk {
		out.last = n.position().LastGeneration // the field the gap adds to FenceOk
	}
	return []sim.Envelope[msg]{{To: from, Msg: out}}
}

// Step handles one message.
func (n *rnode) Step(now sim.Time, from sim.NodeID, m msg) []sim.Envelope[msg] {
	switch m.k {
	case kLead:
		return n.startLeading(now, m.gen)
	case kGrant:
		if n.lead != nil && n.lead.gen == m.gen {
			n.lease = n.lease.Renew(n.w.leaseCfg, m.gen, m.local)
		}
	case kPut:
		if n.lead != nil {
			n.lead.put(n, m.val)
		}
	case kGet:
		return n.get(now, m.id)
	case kRepl:
		switch m.m.(type) {
		case *proto.ReplicateRecords, *proto.Fence:
			return n.follow(from, m.pk, m.m)
		}
		if n.lead != nil {
			return n.lead.answer(n, now, from, m)
		}
	}
	return nil
}

// Tick: heartbeat placement, then the leader's work.
func (n *rnode) Tick(now sim.Time) []sim.Envelope[msg] {
	var out []sim.Envelope[msg]
	if now.Sub(n.lastBeat) >= simHeartbeat {
		n.lastBeat = now
		hb := &heartbeat{ballot: n.ballot.Generation}
		if n.lead != nil && n.lead.serving {
			hb.leading, hb.report = n.lead.gen, n.lead.report(n)
		}
		out = append(out, sim.Envelope[msg]{To: placementNode, Msg: msg{k: kHeartbeat, hb: hb, local: n.local(now)}})
	}
	if n.lead != nil {
		out = append(out, n.lead.tick(n, now)...)
	}
	return out
}

// Status renders the node: role, ballot, log.
func (n *rnode) Status() string {
	role := "follower"
	if n.lead != nil {
		role = fmt.Sprintf("leader gen=%d serving=%v", n.lead.gen, n.lead.serving)
	}
	return fmt.Sprintf("%s ballot=%d:%s log=%d@%d", role, n.ballot.Generation, n.ballot.Leader,
		len(n.log), n.position().LastGeneration)
}
