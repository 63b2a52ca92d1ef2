package sim

import "container/heap"

// event is one copy of a message in flight, due at at. seq is the order in
// which copies were queued: it breaks ties between copies due at the same
// time, so the queue's order is a function of the run alone.
type event[M any] struct {
	at       Time
	seq      uint64
	from, to NodeID
	msg      M
	note     string // "corrupt: …" or "dup", for the delivery trace
}

// eventQueue is a min-heap of events by (at, seq).
type eventQueue[M any] []*event[M]

// Len, Less, Swap, Push and Pop implement container/heap.Interface.
func (q eventQueue[M]) Len() int { return len(q) }

func (q eventQueue[M]) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}

func (q eventQueue[M]) Swap(i, j int) { q[i], q[j] = q[j], q[i] }

func (q *eventQueue[M]) Push(x any) { *q = append(*q, x.(*event[M])) }

func (q *eventQueue[M]) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}

func (q *eventQueue[M]) push(e *event[M]) { heap.Push(q, e) }

func (q *eventQueue[M]) pop() *event[M] { return heap.Pop(q).(*event[M]) }

func (q eventQueue[M]) peek() *event[M] { return q[0] }
