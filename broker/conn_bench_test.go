package broker

import "testing"

// BenchmarkPublishLargeFrame is BenchmarkBinaryPublish with a 64 × 1 KiB batch (a 66 KiB
// frame, past the old 64 KiB read-buffer pool limit): allocs/op and B/op show whether the
// session's read buffers are reused (conn.go, getBuffer/release; issue 22).
func BenchmarkPublishLargeFrame(b *testing.B) { benchPublish(b, 64, 1024) }
