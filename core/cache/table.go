package cache

// table is the value store of one shard: a slot array indexed by a map, a
// min-heap of slots by expiry instant (for the sweep and for eviction), and a
// doubly linked list of slots in write order (least recently written at the
// head). Freed slots keep their value buffers for reuse, so overwrites and
// churn at a steady key count allocate nothing.
type table struct {
	slots []slot
	free  []int32
	index map[string]int32
	heap  []int32 // slots with an expiry, ordered by expiresAt
	head  int32   // least recently written slot, none when -1
	tail  int32   // most recently written slot, none when -1
	bytes int64   // accounted size: Σ len(key)+len(value)+EntryOverheadBytes
}

// slot is one stored value.
type slot struct {
	key       string
	value     []byte // non-nil while live, even when empty
	expiresAt int64  // Unix ms; meaningful when hasExpiry
	hasExpiry bool
	heapPos   int32 // index in table.heap, -1 when the value does not expire
	prev      int32 // write-order neighbours, -1 at the ends
	next      int32
}

const none = -1

func newTable() *table {
	return &table{index: make(map[string]int32), head: none, tail: none}
}

// len returns the number of stored values.
func (t *table) len() int { return len(t.index) }

// lookup returns the slot of key.
func (t *table) lookup(key []byte) (int32, bool) {
	i, ok := t.index[string(key)]
	return i, ok
}

// accounted returns the size a value of these lengths adds to t.bytes.
func accounted(keyLen, valueLen int) int64 {
	return int64(keyLen) + int64(valueLen) + EntryOverheadBytes
}

// set stores a copy of value under key with the given expiry, as the most
// recently written value, and returns its slot.
func (t *table) set(key, value []byte, hasExpiry bool, expiresAt int64) int32 {
	i, ok := t.index[string(key)]
	if ok {
		s := &t.slots[i]
		t.bytes -= accounted(len(s.key), len(s.value))
		t.unlink(i)
	} else {
		i = t.allocSlot(key)
	}
	s := &t.slots[i]
	s.value = append(s.value[:0], value...)
	if s.value == nil {
		s.value = []byte{}
	}
	t.bytes += accounted(len(s.key), len(s.value))
	t.setExpiry(i, hasExpiry, expiresAt)
	t.linkTail(i)
	return i
}

// allocSlot takes a free slot (or a new one) for a new key.
func (t *table) allocSlot(key []byte) int32 {
	var i int32
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		t.slots = append(t.slots, slot{heapPos: none, prev: none, next: none})
		i = int32(len(t.slots) - 1)
	}
	k := string(key)
	t.slots[i].key = k
	t.index[k] = i
	return i
}

// remove drops slot i; its value buffer is kept for the slot's next use.
func (t *table) remove(i int32) {
	s := &t.slots[i]
	t.bytes -= accounted(len(s.key), len(s.value))
	delete(t.index, s.key)
	t.setExpiry(i, false, 0)
	t.unlink(i)
	s.key = ""
	s.value = s.value[:0]
	t.free = append(t.free, i)
}

// setExpiry updates slot i's expiry and its place in the heap.
func (t *table) setExpiry(i int32, hasExpiry bool, expiresAt int64) {
	s := &t.slots[i]
	s.hasExpiry, s.expiresAt = hasExpiry, expiresAt
	switch {
	case hasExpiry && s.heapPos == none:
		s.heapPos = int32(len(t.heap))
		t.heap = append(t.heap, i)
		t.heapUp(int(s.heapPos))
	case hasExpiry:
		t.heapFix(int(s.heapPos))
	case s.heapPos != none:
		t.heapRemove(int(s.heapPos))
	}
}

// soonest returns the slot with the earliest expiry instant.
func (t *table) soonest() (int32, bool) {
	if len(t.heap) == 0 {
		return none, false
	}
	return t.heap[0], true
}

func (t *table) linkTail(i int32) {
	s := &t.slots[i]
	s.prev, s.next = t.tail, none
	if t.tail != none {
		t.slots[t.tail].next = i
	} else {
		t.head = i
	}
	t.tail = i
}

func (t *table) unlink(i int32) {
	s := &t.slots[i]
	if s.prev != none {
		t.slots[s.prev].next = s.next
	} else {
		t.head = s.next
	}
	if s.next != none {
		t.slots[s.next].prev = s.prev
	} else {
		t.tail = s.prev
	}
	s.prev, s.next = none, none
}

func (t *table) heapLess(a, b int) bool {
	return t.slots[t.heap[a]].expiresAt < t.slots[t.heap[b]].expiresAt
}

func (t *table) heapSwap(a, b int) {
	t.heap[a], t.heap[b] = t.heap[b], t.heap[a]
	t.slots[t.heap[a]].heapPos = int32(a)
	t.slots[t.heap[b]].heapPos = int32(b)
}

func (t *table) heapUp(j int) {
	for j > 0 {
		parent := (j - 1) / 2
		if !t.heapLess(j, parent) {
			return
		}
		t.heapSwap(j, parent)
		j = parent
	}
}

func (t *table) heapDown(j int) bool {
	start := j
	n := len(t.heap)
	for {
		smallest, left := j, 2*j+1
		if left < n && t.heapLess(left, smallest) {
			smallest = left
		}
		if right := left + 1; right < n && t.heapLess(right, smallest) {
			smallest = right
		}
		if smallest == j {
			return j != start
		}
		t.heapSwap(j, smallest)
		j = smallest
	}
}

func (t *table) heapFix(j int) {
	if !t.heapDown(j) {
		t.heapUp(j)
	}
}

func (t *table) heapRemove(j int) {
	last := len(t.heap) - 1
	removed := t.heap[j]
	if j != last {
		t.heapSwap(j, last)
	}
	t.heap = t.heap[:last]
	t.slots[removed].heapPos = none
	if j != last {
		t.heapFix(j)
	}
}
