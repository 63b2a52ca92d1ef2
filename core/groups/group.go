package groups

// ConsumerID names one consumer of a group. The broker assigns it (for example one per
// connection and group); the state machine only compares ids.
type ConsumerID uint64

type entryState uint8

const (
	stateLeased  entryState = 1 // leased to consumer until at
	statePending entryState = 2 // waiting for redelivery from at on
)

// entry is one outstanding offset of a group: delivered at least once (or redriven) and
// neither acked nor dead-lettered.
type entry struct {
	deliveries uint32
	state      entryState
	consumer   ConsumerID // holder (leased) or last holder (pending)
	at         int64      // lease deadline (leased) or ready time (pending), Unix ms
}

// DeadLetter is one offset a group gave up on (spec/client-protocol.md §8.3
// dead_letters entries).
type DeadLetter struct {
	Offset     uint64 // offset in the stream shard's records log
	Deliveries uint32 // deliveries made before it was dead-lettered
	AtMillis   int64  // Unix ms when it was dead-lettered
}

// group is the state of one consumer group on the shard.
//
// Offsets below frontier that are not in entries are done (acked or dead-lettered);
// offsets at or above frontier were never delivered. Every key of entries is below
// frontier, except none; dead offsets are kept in dead (from the dead-letter log).
type group struct {
	id       uint64
	name     string
	cfg      GroupConfig
	frontier uint64
	entries  map[uint64]entry
	order    offsetQueue // outstanding offsets ascending, lazily pruned
	leases   timedHeap   // lease deadlines
	ready    timedHeap   // pending ready times
	dead     map[uint64]DeadLetter
}

func newGroup(name string, cfg GroupConfig, start uint64) *group {
	return &group{
		id:       GroupID(name),
		name:     name,
		cfg:      cfg,
		frontier: start,
		entries:  make(map[uint64]entry),
		dead:     make(map[uint64]DeadLetter),
	}
}

// resume returns the lowest offset neither acked nor dead-lettered: where the group
// would restart (the cursor record's next_offset).
func (g *group) resume() uint64 {
	q := &g.order
	for q.head < len(q.items) {
		off := q.items[q.head]
		if _, ok := g.entries[off]; ok {
			return off
		}
		q.head++
	}
	q.items = q.items[:0]
	q.head = 0
	return g.frontier
}

// current reports whether t still describes entry e (not superseded).
func current(e entry, ok bool, t timed, st entryState) bool {
	return ok && e.state == st && e.deliveries == t.deliveries && e.at == t.at
}

// lease hands offset off to consumer c with delivery number n until deadline.
func (g *group) lease(off uint64, n uint32, c ConsumerID, deadline int64) {
	g.entries[off] = entry{deliveries: n, state: stateLeased, consumer: c, at: deadline}
	g.leases.push(timed{at: deadline, offset: off, deliveries: n})
	g.leases.prune(2*len(g.entries)+64, g.liveLease)
}

func (g *group) liveLease(t timed) bool {
	e, ok := g.entries[t.offset]
	return current(e, ok, t, stateLeased)
}

func (g *group) livePending(t timed) bool {
	e, ok := g.entries[t.offset]
	return current(e, ok, t, statePending)
}

// setPending makes off wait for redelivery from readyAt on.
func (g *group) setPending(off uint64, e entry, readyAt int64) {
	e.state = statePending
	e.at = readyAt
	g.entries[off] = e
	g.ready.push(timed{at: readyAt, offset: off, deliveries: e.deliveries})
	g.ready.prune(2*len(g.entries)+64, g.livePending)
}

// nextExpiry returns the earliest current lease deadline, dropping superseded items
// from the top of the lease heap.
func (g *group) nextExpiry() (int64, bool) {
	for len(g.leases) > 0 {
		if g.liveLease(g.leases[0]) {
			return g.leases[0].at, true
		}
		g.leases.pop()
	}
	return 0, false
}

// nextReady returns the earliest current ready time, dropping superseded items from
// the top of the ready heap.
func (g *group) nextReady() (int64, bool) {
	for len(g.ready) > 0 {
		if g.livePending(g.ready[0]) {
			return g.ready[0].at, true
		}
		g.ready.pop()
	}
	return 0, false
}
