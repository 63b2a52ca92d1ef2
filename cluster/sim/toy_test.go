package sim

// The toy machine of this package's tests: a primary-backup replicated log
// with acknowledgements. It exists to exercise the simulator (every fault
// kind matters to it) and to show that the invariant checker has teeth: two
// bugs can be planted behind test-only flags.
//
// Node 1 is the primary. A client (External) sends put v; the primary
// appends it at seq len+1 to its log file, syncs, and sends repl seq v to
// every backup. A backup appends repl seq v when seq is its next, and on its
// next tick syncs and answers ack d, d being its durable length (the
// protocol's durable_offset). The primary resends from d+1 to a backup that
// lags, every toyRetryTicks ticks, and answers ok seq to the client once
// every backup acknowledged seq. Every message and every log record is a
// 17-byte frame with a CRC-32; a frame that fails it is rejected and counted.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
)

const (
	kindPut  byte = 1 // client -> primary: value
	kindRepl byte = 2 // primary -> backup: seq, value (also the log record)
	kindAck  byte = 3 // backup -> primary: seq = durable length
	kindOK   byte = 4 // primary -> client: seq committed on every node

	toyFrameBytes = 17
	toyRetryTicks = 3
	toyLogFile    = "log"
)

var (
	errToyShort    = errors.New("short frame")
	errToyChecksum = errors.New("checksum mismatch")
	errToyKind     = errors.New("unknown kind")
)

type toyMsg struct {
	kind byte
	seq  uint32
	val  uint64
}

func (m toyMsg) encode() []byte {
	b := make([]byte, toyFrameBytes)
	b[0] = m.kind
	binary.BigEndian.PutUint32(b[1:], m.seq)
	binary.BigEndian.PutUint64(b[5:], m.val)
	binary.BigEndian.PutUint32(b[13:], crc32.ChecksumIEEE(b[:13]))
	return b
}

// decodeToy parses one frame; skipChecksum is the planted bug that trusts
// a frame without checking it.
func decodeToy(b []byte, skipChecksum bool) (toyMsg, error) {
	if len(b) < toyFrameBytes {
		return toyMsg{}, errToyShort
	}
	if !skipChecksum && binary.BigEndian.Uint32(b[13:]) != crc32.ChecksumIEEE(b[:13]) {
		return toyMsg{}, errToyChecksum
	}
	m := toyMsg{kind: b[0], seq: binary.BigEndian.Uint32(b[1:]), val: binary.BigEndian.Uint64(b[5:])}
	if m.kind < kindPut || m.kind > kindOK {
		return toyMsg{}, errToyKind
	}
	return m, nil
}

func (m toyMsg) String() string {
	switch m.kind {
	case kindPut:
		return fmt.Sprintf("put %d", m.val)
	case kindRepl:
		return fmt.Sprintf("repl %d %d", m.seq, m.val)
	case kindAck:
		return fmt.Sprintf("ack %d", m.seq)
	}
	return fmt.Sprintf("ok %d", m.seq)
}

// formatToy is the trace's Format: the message, or why it does not decode.
func formatToy(b []byte) string {
	m, err := decodeToy(b, false)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return m.String()
}

// toyBugs are the planted bugs; the zero value is the correct machine.
type toyBugs struct {
	ackBeforeSync bool // a backup acks a record before its sync
	skipChecksum  bool // every decoder trusts frames without their CRC
}

// toyWorld is what the machines of one run share with the test: the
// configuration and the ghost state the invariants read (what the primary
// accepted, what each node promised was durable, what the client was told).
type toyWorld struct {
	primary  NodeID
	backups  []NodeID
	bugs     toyBugs
	truth    []uint64          // values in the order the primary accepted them
	promised map[NodeID]uint32 // highest ack d each node ever sent
	okSeq    uint32            // highest ok seq the client received
}

func newToyWorld(bugs toyBugs) *toyWorld {
	return &toyWorld{primary: 1, bugs: bugs, promised: map[NodeID]uint32{}}
}

// factory builds node env.ID's machine and recovers its log from disk.
func (w *toyWorld) factory(env Env) Machine[[]byte] {
	if env.ID != w.primary && !containsNode(w.backups, env.ID) {
		w.backups = append(w.backups, env.ID)
	}
	m := &toy{w: w, env: env, file: env.Disk.File(toyLogFile), match: map[NodeID]uint32{},
		next: map[NodeID]uint32{}, lastSend: map[NodeID]int{}}
	m.recover()
	return m
}

func containsNode(ids []NodeID, id NodeID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// toy is one node's machine; the primary's fields are unused on a backup.
type toy struct {
	w        *toyWorld
	env      Env
	file     *File
	log      []uint64
	rejected int
	ticks    int
	dirty    bool              // backup: received something since the last ack
	match    map[NodeID]uint32 // primary: highest ack per backup
	next     map[NodeID]uint32 // primary: next seq to send per backup
	lastSend map[NodeID]int    // primary: tick of the last send per backup
	commit   uint32            // primary: highest seq acknowledged by all
}

// recover reads the log file's frames and cuts a torn or damaged tail.
func (m *toy) recover() {
	data := m.file.Bytes()
	good := 0
	for len(data)-good >= toyFrameBytes {
		rec, err := decodeToy(data[good:good+toyFrameBytes], false)
		if err != nil || rec.kind != kindRepl || rec.seq != uint32(len(m.log)+1) {
			break
		}
		m.log = append(m.log, rec.val)
		good += toyFrameBytes
	}
	if good < len(data) {
		m.env.Logf("recovery cut a torn or damaged tail of %d bytes after %d records", len(data)-good, len(m.log))
		m.file.Truncate(good)
	}
}

func (m *toy) appendRecord(v uint64) {
	m.log = append(m.log, v)
	m.file.Append(toyMsg{kind: kindRepl, seq: uint32(len(m.log)), val: v}.encode())
}

func (m *toy) Step(now Time, from NodeID, b []byte) []Envelope[[]byte] {
	msg, err := decodeToy(b, m.w.bugs.skipChecksum)
	if err != nil {
		m.rejected++
		m.env.Logf("rejected a frame from %v: %v", from, err)
		return nil
	}
	if m.env.ID == m.w.primary {
		return m.stepPrimary(from, msg)
	}
	return m.stepBackup(msg)
}

func (m *toy) stepPrimary(from NodeID, msg toyMsg) []Envelope[[]byte] {
	switch msg.kind {
	case kindPut:
		m.appendRecord(msg.val)
		m.file.Sync()
		m.w.truth = append(m.w.truth, msg.val)
		var out []Envelope[[]byte]
		for _, b := range m.w.backups {
			out = append(out, m.sendRepl(b, uint32(len(m.log))))
		}
		return out
	case kindAck:
		m.match[from] = max(m.match[from], msg.seq)
		m.next[from] = msg.seq + 1
		return m.advanceCommit()
	}
	return nil
}

func (m *toy) sendRepl(to NodeID, seq uint32) Envelope[[]byte] {
	m.lastSend[to] = m.ticks
	return Envelope[[]byte]{To: to, Msg: toyMsg{kind: kindRepl, seq: seq, val: m.log[seq-1]}.encode()}
}

func (m *toy) advanceCommit() []Envelope[[]byte] {
	c := uint32(len(m.log))
	for _, b := range m.w.backups {
		c = min(c, m.match[b])
	}
	var out []Envelope[[]byte]
	for m.commit < c {
		m.commit++
		out = append(out, Envelope[[]byte]{To: External, Msg: toyMsg{kind: kindOK, seq: m.commit}.encode()})
	}
	return out
}

func (m *toy) stepBackup(msg toyMsg) []Envelope[[]byte] {
	if msg.kind != kindRepl {
		return nil
	}
	m.dirty = true
	if msg.seq != uint32(len(m.log)+1) {
		return nil // a resend (seq <= len) or a gap: the next ack says where we are
	}
	m.appendRecord(msg.val)
	if m.w.bugs.ackBeforeSync {
		return []Envelope[[]byte]{m.ack(uint32(len(m.log)))}
	}
	return nil
}

func (m *toy) ack(d uint32) Envelope[[]byte] {
	m.w.promised[m.env.ID] = max(m.w.promised[m.env.ID], d)
	return Envelope[[]byte]{To: m.w.primary, Msg: toyMsg{kind: kindAck, seq: d}.encode()}
}

func (m *toy) Tick(now Time) []Envelope[[]byte] {
	m.ticks++
	if m.env.ID != m.w.primary {
		if !m.dirty {
			return nil
		}
		m.dirty = false
		m.file.Sync()
		return []Envelope[[]byte]{m.ack(uint32(len(m.log)))}
	}
	var out []Envelope[[]byte]
	for _, b := range m.w.backups {
		if m.match[b] >= uint32(len(m.log)) || m.ticks-m.lastSend[b] < toyRetryTicks {
			continue
		}
		from := max(m.next[b], 1)
		for seq := from; seq <= uint32(len(m.log)) && seq < from+4; seq++ {
			out = append(out, m.sendRepl(b, seq))
		}
	}
	return out
}

func (m *toy) Status() string {
	vals := make([]string, len(m.log))
	for i, v := range m.log {
		vals[i] = fmt.Sprint(v)
	}
	s := fmt.Sprintf("log=[%s] rejected=%d", strings.Join(vals, " "), m.rejected)
	if m.env.ID != m.w.primary {
		return "backup " + s
	}
	var match []string
	for _, b := range m.w.backups {
		match = append(match, fmt.Sprintf("%v:%d", b, m.match[b]))
	}
	return fmt.Sprintf("primary %s commit=%d match=[%s]", s, m.commit, strings.Join(match, " "))
}

// toyCheck is the safety invariant: every running node's log is a prefix
// of what the primary accepted; no node's log is shorter than what it
// promised durable; the client was told ok only for seqs every backup
// promised.
func toyCheck(s *Sim[[]byte], w *toyWorld) error {
	for _, id := range s.Nodes() {
		m, ok := s.Machine(id).(*toy)
		if !ok {
			continue
		}
		if len(m.log) > len(w.truth) {
			return fmt.Errorf("node %v holds %d records, the primary accepted %d", id, len(m.log), len(w.truth))
		}
		for i, v := range m.log {
			if v != w.truth[i] {
				return fmt.Errorf("node %v seq %d = %d, the primary accepted %d", id, i+1, v, w.truth[i])
			}
		}
		if p := w.promised[id]; uint32(len(m.log)) < p {
			return fmt.Errorf("node %v holds %d records after promising %d durable", id, len(m.log), p)
		}
	}
	for _, b := range w.backups {
		if w.promised[b] < w.okSeq {
			return fmt.Errorf("client told ok %d, backup %v promised only %d", w.okSeq, b, w.promised[b])
		}
	}
	return nil
}

// newToySim returns a simulator of the toy with the invariant installed;
// the client's oks are recorded into w.
func newToySim(opts Options, bugs toyBugs, trace func(string)) (*Sim[[]byte], *toyWorld) {
	w := newToyWorld(bugs)
	s := New(Config[[]byte]{
		Options: opts,
		New:     w.factory,
		Format:  formatToy,
		Trace:   trace,
		External: func(_ Time, _ NodeID, b []byte) {
			if m, err := decodeToy(b, false); err == nil && m.kind == kindOK {
				w.okSeq = max(w.okSeq, m.seq)
			}
		},
	})
	s.SetInvariant(func() error { return toyCheck(s, w) })
	return s, w
}
