package proto

import (
	"bytes"
	"testing"
)

func TestEventBatchBuilderMatchesEncoders(t *testing.T) {
	payloads := [][]byte{[]byte("a"), {}, []byte("bc")}
	var b EventBatchBuilder
	for _, withOffsets := range []bool{false, true} {
		for n := 0; n <= len(payloads); n++ {
			b.BeginShared([]byte("keep"), withOffsets, 5)
			for _, p := range payloads[:n] {
				b.Add(p)
			}
			if b.Count() != n || b.FrameLen() != len(AppendSharedEventBatch(nil, 5, withOffsets, payloads[:n])) {
				t.Fatalf("count %d len %d", b.Count(), b.FrameLen())
			}
			got := b.Finish()
			want := AppendSharedEventBatch([]byte("keep"), 5, withOffsets, payloads[:n])
			if !bytes.Equal(got, want) {
				t.Fatalf("shared offsets=%v n=%d:\n got %x\nwant %x", withOffsets, n, got, want)
			}
			b.BeginLegacy(nil, 7, withOffsets, 5)
			for _, p := range payloads[:n] {
				b.Add(p)
			}
			if got, want := b.Finish(), AppendLegacyEventBatch(nil, 7, 5, withOffsets, payloads[:n]); !bytes.Equal(got, want) {
				t.Fatalf("legacy offsets=%v n=%d:\n got %x\nwant %x", withOffsets, n, got, want)
			}
		}
	}
	buf := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(50, func() {
		b.BeginShared(buf[:0], true, 1)
		for _, p := range payloads {
			b.Add(p)
		}
		buf = b.Finish()
	})
	if allocs != 0 {
		t.Fatalf("builder allocated %v times", allocs)
	}
}
