package cache

import "testing"

// checkTable verifies the table's internal invariants: index, heap order and
// positions, write-order list, accounted bytes.
func checkTable(t testing.TB, tb *table) {
	t.Helper()
	var bytes int64
	for k, i := range tb.index {
		sl := &tb.slots[i]
		if sl.key != k || sl.value == nil {
			t.Fatalf("slot %d: key %q value nil=%v, index says %q", i, sl.key, sl.value == nil, k)
		}
		if sl.hasExpiry != (sl.heapPos != none) {
			t.Fatalf("slot %d: hasExpiry %v heapPos %d", i, sl.hasExpiry, sl.heapPos)
		}
		bytes += accounted(len(sl.key), len(sl.value))
	}
	if bytes != tb.bytes {
		t.Fatalf("accounted %d, recomputed %d", tb.bytes, bytes)
	}
	for j, i := range tb.heap {
		if tb.slots[i].heapPos != int32(j) {
			t.Fatalf("heap[%d] = slot %d whose heapPos is %d", j, i, tb.slots[i].heapPos)
		}
		if j > 0 && tb.slots[tb.heap[(j-1)/2]].expiresAt > tb.slots[i].expiresAt {
			t.Fatalf("heap order broken at %d", j)
		}
	}
	n, prev := 0, int32(none)
	for i := tb.head; i != none; i = tb.slots[i].next {
		if tb.slots[i].prev != prev {
			t.Fatalf("list: slot %d prev %d, want %d", i, tb.slots[i].prev, prev)
		}
		prev = i
		n++
	}
	if prev != tb.tail || n != len(tb.index) {
		t.Fatalf("list: %d linked, %d indexed, tail %d vs %d", n, len(tb.index), prev, tb.tail)
	}
}
