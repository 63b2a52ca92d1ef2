package seglog

import (
	"unsafe"

	"felix/ring"
)

// Staging buffers: aligned memory from ring.AlignedBuffer (outside the Go heap), one per
// unit, kept on a small free list per log and reused (issue 22).

// getBuf returns the smallest free staging buffer of at least size bytes, else a new one.
func (l *Log) getBuf(size int) []byte {
	best := -1
	for i, b := range l.freeBufs {
		if len(b) >= size && (best < 0 || len(b) < len(l.freeBufs[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := l.freeBufs[best]
		l.freeBufs = append(l.freeBufs[:best], l.freeBufs[best+1:]...)
		return b
	}
	b, err := ring.AlignedBuffer(size)
	if err != nil {
		return alignedHeap(size, l.block)
	}
	return b
}

// freeBufsMax is how many retired staging buffers a log keeps: enough for the units of a
// write and an fdatasync in flight plus the one staging, so a steady log maps and unmaps
// none (munmap per commit was 8–10 % of broker CPU, issue 22).
const freeBufsMax = 4

// putBuf keeps b for reuse; with freeBufsMax kept it releases the smallest of them and b.
func (l *Log) putBuf(b []byte) {
	b = b[:cap(b)]
	if len(l.freeBufs) < freeBufsMax {
		l.freeBufs = append(l.freeBufs, b)
		return
	}
	small := 0
	for i, f := range l.freeBufs {
		if len(f) < len(l.freeBufs[small]) {
			small = i
		}
	}
	if len(b) > len(l.freeBufs[small]) {
		b, l.freeBufs[small] = l.freeBufs[small], b
	}
	ring.FreeAligned(b)
}

func (l *Log) freeAll() {
	for _, b := range l.freeBufs {
		ring.FreeAligned(b)
	}
	l.freeBufs = nil
}

// alignedHeap returns a heap slice of size bytes aligned to align (fallback
// when mmap fails).
func alignedHeap(size, align int) []byte {
	b := make([]byte, size+align)
	off := int(uintptr(align)-uintptr(unsafe.Pointer(&b[0]))&uintptr(align-1)) & (align - 1)
	return b[off : off+size : off+size]
}
