package core

import "container/heap"

// coreTimer is one entry of a core's deadline-ordered timer list. Its owner
// embeds or allocates it once and reschedules it as often as it likes; fn
// runs on the core goroutine with the clock reading that fired it.
//
// Shard types use it for periodic work (fsync, TTL sweeps, lease expiry):
//
//	t := &coreTimer{fn: func(now int64) { ...; c.timers.schedule(t, now+period) }}
//	c.timers.schedule(t, c.clock.MonoNanos()+period)
type coreTimer struct {
	at    int64 // deadline, clock.MonoNanos units
	fn    func(now int64)
	index int // position in the heap; -1 when not scheduled
}

// timerList is a min-heap of timers by deadline. Core goroutine only.
type timerList struct {
	heap timerHeap
}

// schedule sets t's deadline to at, adding it or moving it.
func (l *timerList) schedule(t *coreTimer, at int64) {
	t.at = at
	if t.index >= 0 && t.index < len(l.heap) && l.heap[t.index] == t {
		heap.Fix(&l.heap, t.index)
		return
	}
	heap.Push(&l.heap, t)
}

// stop removes t if it is scheduled.
func (l *timerList) stop(t *coreTimer) {
	if t.index >= 0 && t.index < len(l.heap) && l.heap[t.index] == t {
		heap.Remove(&l.heap, t.index)
	}
	t.index = -1
}

// next returns the earliest deadline, or false when no timer is scheduled.
func (l *timerList) next() (int64, bool) {
	if len(l.heap) == 0 {
		return 0, false
	}
	return l.heap[0].at, true
}

// run fires every timer whose deadline is at or before now, earliest first.
// A timer rescheduled by its own fn for a time <= now fires again in the same
// call, so periodic timers must advance their deadline.
func (l *timerList) run(now int64) int {
	fired := 0
	for len(l.heap) > 0 && l.heap[0].at <= now {
		t := heap.Pop(&l.heap).(*coreTimer)
		fired++
		t.fn(now)
	}
	return fired
}

type timerHeap []*coreTimer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*coreTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}
