package groups

// Token identifies one write batch: the records staged between two TakeEffects calls.
// Tokens grow by one per batch, from 1. docs/groups.md, "Durability".
type Token uint64

// Effects is the log work owed by the calls made since the previous TakeEffects, in
// order. The core appends Cursor to the shard's cursor log and DeadLetters to its
// dead-letter log (one seglog Append each, payloads in the given order) and, once both
// are durable under the shard's fsync mode, calls MarkDurable(Token).
//
// The payload slices alias buffers of the Shard: they stay valid until the next
// TakeEffects call (seglog copies them into its staging buffer at Append).
type Effects struct {
	Cursor      [][]byte
	DeadLetters [][]byte
	Token       Token
}

// Empty reports whether there is nothing to append.
func (e Effects) Empty() bool { return len(e.Cursor) == 0 && len(e.DeadLetters) == 0 }

type span struct{ start, end int }

// effectsBuffer stages encoded records: cursor records in one arena, dead-letter records
// in another (a cursor record stays open while dead letters are staged). Two pairs of
// arenas alternate so the slices handed out by take stay valid while the next batch is
// built.
type effectsBuffer struct {
	arenas  [2][]byte // cursor records
	dArenas [2][]byte // dead-letter records
	cur     int
	cursor  []span
	dead    []span
	outCur  [][]byte
	outDead [][]byte
	batch   Token // token of the batch being built
	durable Token // highest token marked durable
}

func (b *effectsBuffer) arena() *[]byte     { return &b.arenas[b.cur] }
func (b *effectsBuffer) deadArena() *[]byte { return &b.dArenas[b.cur] }

// take returns the staged batch and starts the next one.
func (b *effectsBuffer) take() Effects {
	a, d := b.arenas[b.cur], b.dArenas[b.cur]
	b.outCur = b.outCur[:0]
	for _, s := range b.cursor {
		b.outCur = append(b.outCur, a[s.start:s.end:s.end])
	}
	b.outDead = b.outDead[:0]
	for _, s := range b.dead {
		b.outDead = append(b.outDead, d[s.start:s.end:s.end])
	}
	e := Effects{Cursor: b.outCur, DeadLetters: b.outDead, Token: b.batch}
	b.cursor = b.cursor[:0]
	b.dead = b.dead[:0]
	b.cur ^= 1
	b.arenas[b.cur] = b.arenas[b.cur][:0]
	b.dArenas[b.cur] = b.dArenas[b.cur][:0]
	b.batch++
	return e
}

// recordBuilder stages one cursor record whose entries are appended one by one. It opens
// the record lazily at the first entry, so an operation that owes nothing writes nothing.
type recordBuilder struct {
	s     *Shard
	g     *group
	kind  CursorKind
	start int
	count uint32
	open  bool
}

func (r *recordBuilder) add(e CursorEntry) {
	a := r.s.fx.arena()
	if !r.open {
		r.open = true
		r.start = len(*a)
		*a = appendCursorHeader(*a, r.kind, r.g.id, 0, 0, 0)
	}
	*a = appendEntry(*a, r.kind, e)
	r.count++
}

// finish patches the header (next_offset = the group's resume point now,
// dead_letter_log_end = the dead-letter log end now) and queues the record.
func (r *recordBuilder) finish() {
	if !r.open {
		return
	}
	a := *r.s.fx.arena()
	patchCursorHeader(a[r.start:], r.g.resume(), r.s.dlEnd, r.count)
	r.s.fx.cursor = append(r.s.fx.cursor, span{r.start, len(a)})
	r.open = false
}

// stageDeadLetter stages one dead-letter log record and returns its dead-letter log offset.
func (s *Shard) stageDeadLetter(r DeadLetterRecord) uint64 {
	a := s.fx.deadArena()
	start := len(*a)
	*a = AppendDeadLetterRecord(*a, r)
	s.fx.dead = append(s.fx.dead, span{start, len(*a)})
	seq := s.dlEnd
	s.dlEnd++
	return seq
}

// stageCursor stages an already encoded cursor record built by fn on the arena.
func (s *Shard) stageCursor(fn func([]byte) []byte) {
	a := s.fx.arena()
	start := len(*a)
	*a = fn(*a)
	s.fx.cursor = append(s.fx.cursor, span{start, len(*a)})
}

// TakeEffects returns the records staged since the previous call and starts a new
// batch. It returns an Effects with no payloads (but a Token) when nothing is owed.
func (s *Shard) TakeEffects() Effects { return s.fx.take() }

// MarkDurable records that every batch up to and including t is durable in both logs.
// Calls must come in token order; an older token changes nothing.
func (s *Shard) MarkDurable(t Token) {
	if t > s.fx.durable {
		s.fx.durable = t
	}
}

// Durable reports whether the batch t (and every earlier one) is durable, i.e. whether
// an answer that returned t may be released.
func (s *Shard) Durable(t Token) bool { return t <= s.fx.durable }

// CurrentToken returns the token of the batch being built: waiting for it waits for
// every record staged so far (a read-only answer uses it so that it only reports
// durable state).
func (s *Shard) CurrentToken() Token { return s.fx.batch }
