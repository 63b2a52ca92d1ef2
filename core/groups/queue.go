package groups

// timed is one scheduled check on an outstanding offset: a lease deadline or the time a
// pending offset becomes ready. It is stale (skipped) once the entry it names changed:
// see group.current.
type timed struct {
	at         int64 // Unix ms
	offset     uint64
	deliveries uint32
}

// timedHeap is a binary min-heap on (at, offset). It never allocates once grown;
// typed to avoid container/heap's boxing.
type timedHeap []timed

func (h timedHeap) less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].offset < h[j].offset
}

func (h *timedHeap) push(t timed) {
	*h = append(*h, t)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

// pop removes and returns the minimum; the heap must not be empty.
func (h *timedHeap) pop() timed {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	s.down(0)
	*h = s
	return top
}

// offsetQueue keeps the outstanding offsets of a group in ascending order, with lazy
// deletion: an offset whose entry is gone is dropped when it reaches the front.
// Fresh deliveries append in ascending order; a redrive inserts in place (rare).
type offsetQueue struct {
	items []uint64
	head  int
}

func (q *offsetQueue) pushBack(off uint64) {
	if q.head > 0 && q.head >= len(q.items)/2 {
		n := copy(q.items, q.items[q.head:])
		q.items = q.items[:n]
		q.head = 0
	}
	q.items = append(q.items, off)
}

// insert puts off in ascending position (no duplicates expected).
func (q *offsetQueue) insert(off uint64) {
	live := q.items[q.head:]
	lo, hi := 0, len(live)
	for lo < hi {
		mid := (lo + hi) / 2
		if live[mid] < off {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(live) && live[lo] == off {
		return
	}
	q.items = append(q.items, 0)
	live = q.items[q.head:]
	copy(live[lo+1:], live[lo:])
	live[lo] = off
}

// prune drops the items for which keep is false once they outnumber limit, then
// restores heap order. Acked and nacked leases leave superseded items behind; pruning
// when the heap is more than twice the live entries keeps memory bounded by the
// outstanding offsets at amortised O(1) per push.
func (h *timedHeap) prune(limit int, keep func(timed) bool) {
	if len(*h) <= limit {
		return
	}
	s := (*h)[:0]
	for _, t := range *h {
		if keep(t) {
			s = append(s, t)
		}
	}
	for i := len(s)/2 - 1; i >= 0; i-- {
		s.down(i)
	}
	*h = s
}

// down restores heap order below i.
func (h timedHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
