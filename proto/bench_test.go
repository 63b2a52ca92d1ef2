package proto

import "testing"

func benchPayloads() [][]byte {
	p := make([][]byte, 64)
	for i := range p {
		p[i] = make([]byte, 1024)
		for j := range p[i] {
			p[i][j] = byte(i + j)
		}
	}
	return p
}

func BenchmarkPublishBatchEncode(b *testing.B) {
	batch := &PublishBatch{Acked: true, RequestID: 1, AckMode: AckPerBatch, TenantID: []byte("t1"), Namespace: []byte("default"), Stream: []byte("orders"), Payloads: benchPayloads()}
	buf, _ := AppendPublishBatch(nil, batch)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = AppendPublishBatch(buf[:0], batch)
	}
}

func BenchmarkPublishBatchDecode(b *testing.B) {
	batch := &PublishBatch{Acked: true, RequestID: 1, AckMode: AckPerBatch, TenantID: []byte("t1"), Namespace: []byte("default"), Stream: []byte("orders"), Payloads: benchPayloads()}
	frame, _ := AppendPublishBatch(nil, batch)
	body := frame[HeaderSize:]
	var dst PublishBatch
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeAckedPublishBatch(body, false, &dst); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSharedEventBatchEncode(b *testing.B) {
	p := benchPayloads()
	buf := AppendSharedEventBatch(nil, 100, true, p)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendSharedEventBatch(buf[:0], 100, true, p)
	}
}

func BenchmarkEventBatchDecode(b *testing.B) {
	frame := AppendSharedEventBatch(nil, 100, true, benchPayloads())
	body := frame[HeaderSize:]
	var dst EventBatch
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeEventBatch(0x0024, body, &dst); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReplicateRecordsEncode(b *testing.B) {
	m := &ReplicateRecords{Log: LogStream, CorrelationID: 1, Shard: sampleShard(), Epoch: 3, FirstOffset: 1000, Payloads: benchPayloads()}
	buf, _ := AppendInternalFrame(nil, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = AppendInternalFrame(buf[:0], m)
	}
}

func BenchmarkReplicateRecordsDecode(b *testing.B) {
	m := &ReplicateRecords{Log: LogStream, CorrelationID: 1, Shard: sampleShard(), Epoch: 3, FirstOffset: 1000, Payloads: benchPayloads()}
	frame, _ := AppendInternalFrame(nil, m)
	body := frame[InternalHeaderSize:]
	var dst ReplicateRecords
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeReplicateRecords(KindReplicateRecords, body, &dst); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReplicateRecordsDecodeVerify(b *testing.B) {
	m := &ReplicateRecords{Log: LogStream, CorrelationID: 1, Shard: sampleShard(), Epoch: 3, FirstOffset: 1000, Payloads: benchPayloads()}
	frame, _ := AppendInternalFrame(nil, m)
	body := frame[InternalHeaderSize:]
	var dst ReplicateRecords
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeReplicateRecords(KindReplicateRecords, body, &dst); err != nil || !dst.ChecksumOK() {
			b.Fatal(err)
		}
	}
}

func BenchmarkJSONPublishBatchEncode(b *testing.B) {
	m := &JSONPublishBatch{TenantID: "t1", Namespace: "default", Stream: "orders", Payloads: benchPayloads()}
	buf := AppendMessage(nil, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendMessage(buf[:0], m)
	}
}

func BenchmarkJSONPublishBatchDecode(b *testing.B) {
	body := (&JSONPublishBatch{TenantID: "t1", Namespace: "default", Stream: "orders", Payloads: benchPayloads()}).AppendJSON(nil)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeMessage(body); err != nil {
			b.Fatal(err)
		}
	}
}
