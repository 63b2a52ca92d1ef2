package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	stdcrc "hash/crc32"
	"reflect"
	"testing"
)

func sampleShard() ShardRef {
	return ShardRef{Tenant: []byte("t1"), Namespace: []byte("default"), Name: []byte("orders"), Shard: 3}
}

// sampleInternal returns one message of every kind this build knows, keyed by kind.
func sampleInternal() map[Kind]InternalMessage {
	sh := sampleShard()
	fp := ForwardPublish{CorrelationID: 102, Shard: sh, Generation: 7, Payloads: [][]byte{[]byte("a"), []byte("bc")}}
	afp := AuthorizedForwardPublish{ForwardPublish: fp, Credential: []byte("jwt.token.sig")}
	afp.CorrelationID = 122
	ifp := IdempotentForwardPublish{AuthorizedForwardPublish: afp, ProducerID: []byte("p-1"), RequestID: 9}
	ifp.CorrelationID = 128
	cop := ForwardCacheOp{CorrelationID: 106, Shard: sh, Generation: 7, Op: CacheOpPut, Key: []byte("k"), Value: []byte("v"), HasTTL: true, TTLMs: 1000}
	acop := AuthorizedForwardCacheOp{ForwardCacheOp: cop, Credential: []byte("jwt")}
	acop.CorrelationID = 123
	acop.Op = CacheOpCounterAdd
	acop.Value = AppendCounterValue(nil, -5)
	acop.HasTTL, acop.TTLMs = false, 0
	msgs := []InternalMessage{
		&Hello{CorrelationID: 100, NodeID: []byte("broker-1")},
		&HelloOk{CorrelationID: 101, NodeID: []byte("broker-2")},
		&fp,
		&ForwardPublishOk{CorrelationID: 103, FirstOffset: 10, LastOffset: 11},
		&ForwardPublishError{CorrelationID: 104, Code: InternalUnauthorized},
		&InternalNotLeader{CorrelationID: 105, OwnerNodeID: []byte("broker-2"), OwnerAddress: []byte("127.0.0.1:5001"), Generation: 8},
		&cop,
		&ForwardCacheOk{CorrelationID: 107, Present: true, Value: []byte{}},
		&ForwardCacheError{CorrelationID: 108, Code: InternalStaleRoute},
		&ReplicateOk{CorrelationID: 111, DurableOffset: 42},
		&ReplicateError{CorrelationID: 112, Code: InternalLogGap, ExpectedOffset: 40},
		&UnsupportedKind{CorrelationID: 115, RefusedKind: 999},
		&afp,
		&acop,
		&ReplicateRebuild{CorrelationID: 124, Shard: sh, Log: LogDeadLetters, Generation: 9, BaseOffset: 100},
		&Fence{CorrelationID: 125, Shard: sh, Log: LogCache, Generation: 9},
		&FenceOk{CorrelationID: 126, Log: LogCache, Generation: 9, DurableOffset: 77},
		&InternalError{CorrelationID: 127, Code: InternalProtocolVersion},
		&ifp,
		&ForwardPublishDuplicate{CorrelationID: 129, FirstOffset: 10, LastOffset: 11},
		&StorageHello{CorrelationID: 130, NodeID: []byte("broker-1"), StorageID: [StorageIDSize]byte{1}},
		&StorageHelloOk{CorrelationID: 131, NodeID: []byte("broker-2"), StorageID: [StorageIDSize]byte{2}},
		&FencePosition{Fence: Fence{CorrelationID: 132, Shard: sh, Log: LogStream, Generation: 12}},
		&FencePositionOk{FenceOk: FenceOk{CorrelationID: 133, Log: LogProducers, Generation: 12, DurableOffset: 2126},
			LastGeneration: 11},
	}
	for l := LogStream; l <= LogLast; l++ {
		r := &ReplicateRecords{Log: l, CorrelationID: 200 + uint64(l), Shard: sh, Epoch: 4, FirstOffset: 50, Payloads: [][]byte{[]byte("x"), {}}}
		r.Checksum = BatchChecksum(r.Payloads)
		msgs = append(msgs, r, &ReplicateBootstrap{Log: l, CorrelationID: 300 + uint64(l), Shard: sh, Epoch: 4, BaseOffset: 20})
	}
	out := make(map[Kind]InternalMessage, len(msgs))
	for _, m := range msgs {
		out[m.Kind()] = m
	}
	return out
}

// TestEveryBodyBeginsWithItsCorrelationID walks every kind this build knows
// (seeds/internal-protocol.txt: every_body_begins_with_its_correlation_id).
func TestEveryBodyBeginsWithItsCorrelationID(t *testing.T) {
	samples := sampleInternal()
	for k := Kind(0); k.Known(); k++ {
		m, ok := samples[k]
		if !ok {
			t.Fatalf("no sample for kind %d (%v)", k, k)
		}
		frame, err := AppendInternalFrame(nil, m)
		if err != nil {
			t.Fatalf("%v: %v", k, err)
		}
		h, err := DecodeInternalHeader(frame, DefaultMaxFrameBytes)
		if err != nil || h.Kind != k || int(h.Length) != len(frame)-InternalHeaderSize {
			t.Fatalf("%v: header %+v err %v", k, h, err)
		}
		body := frame[InternalHeaderSize:]
		if got := binary.BigEndian.Uint64(body); got != m.Correlation() {
			t.Fatalf("%v: body starts with %d, correlation id %d", k, got, m.Correlation())
		}
		back, err := DecodeInternal(k, body)
		if err != nil {
			t.Fatalf("%v: decode: %v", k, err)
		}
		if !reflect.DeepEqual(back, m) {
			t.Fatalf("%v: round trip\n got %+v\nwant %+v", k, back, m)
		}
		// Every strict prefix of the body fails cleanly.
		for n := 0; n < len(body); n++ {
			_, err := DecodeInternal(k, body[:n])
			if !errors.Is(err, ErrIncomplete) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("%v: prefix %d: err %v, want ErrIncomplete or ErrMalformed (count check)", k, n, err)
			}
		}
	}
}

func TestUnknownKindCarriesCorrelationID(t *testing.T) {
	body := binary.BigEndian.AppendUint64(nil, 0xABCDEF)
	body = append(body, "future fields"...)
	m, err := DecodeInternal(Kind(4000), body)
	if err != nil {
		t.Fatal(err)
	}
	u, ok := m.(*Unknown)
	if !ok || u.CorrelationID != 0xABCDEF || u.RawKind != 4000 {
		t.Fatalf("got %#v", m)
	}
	reply, err := AppendInternalFrame(nil, &UnsupportedKind{CorrelationID: u.CorrelationID, RefusedKind: u.RawKind})
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeInternal(KindUnsupportedKind, reply[InternalHeaderSize:])
	if err != nil || back.(*UnsupportedKind).RefusedKind != 4000 {
		t.Fatalf("reply %v %v", back, err)
	}
	if _, err := DecodeInternal(Kind(4000), body[:7]); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("short unknown body: %v", err)
	}
}

func TestInternalHeaderFatalErrors(t *testing.T) {
	good := AppendInternalHeader(nil, KindHello, 10)
	if _, err := DecodeInternalHeader(good[:11], DefaultMaxFrameBytes); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("short: %v", err)
	} else if _, fatal := errors.AsType[*FatalError](err); fatal {
		t.Fatal("incomplete header must not be fatal")
	}
	cases := []struct {
		name   string
		mutate func(b []byte)
		want   error
	}{
		{"client magic", func(b []byte) { binary.BigEndian.PutUint32(b, Magic) }, ErrInvalidMagic},
		{"version 2", func(b []byte) { binary.BigEndian.PutUint16(b[4:], 2) }, ErrUnsupportedVersion},
		{"too long", func(b []byte) { binary.BigEndian.PutUint32(b[8:], 1<<30) }, ErrFrameTooLarge},
	}
	for _, tc := range cases {
		b := bytes.Clone(good)
		tc.mutate(b)
		_, err := DecodeInternalHeader(b, DefaultMaxFrameBytes)
		fe, ok := errors.AsType[*FatalError](err)
		if !ok || !errors.Is(err, tc.want) {
			t.Fatalf("%s: err %v, want *FatalError wrapping %v", tc.name, err, tc.want)
		}
		if _, ok := errors.AsType[*DecodeError](err); !ok || fe.Err == nil {
			t.Fatalf("%s: no *DecodeError inside", tc.name)
		}
	}
	// A client frame on the internal decoder is fatal; an internal frame on the client decoder is refused.
	if _, err := DecodeHeader(good, DefaultMaxFrameBytes); !errors.Is(err, ErrInvalidMagic) {
		t.Fatalf("FLXI on FLX1 decoder: %v", err)
	}
}

func TestBatchChecksumCoversLengths(t *testing.T) {
	a := [][]byte{[]byte("ab"), []byte("c")}
	b := [][]byte{[]byte("a"), []byte("bc")}
	if BatchChecksum(a) == BatchChecksum(b) {
		t.Fatal("resplit batch hashes the same")
	}
	if BatchChecksum(a) != BatchChecksum([][]byte{[]byte("ab"), []byte("c")}) {
		t.Fatal("checksum not deterministic")
	}
	// Empty payloads count: [""] differs from [].
	if BatchChecksum([][]byte{{}}) == BatchChecksum(nil) {
		t.Fatal("empty payload not covered")
	}
	// Same value as the standard library's CRC-32/IEEE over len||bytes for each payload.
	want := stdcrc.ChecksumIEEE([]byte{0, 0, 0, 2, 'a', 'b', 0, 0, 0, 1, 'c'})
	if got := BatchChecksum(a); got != want {
		t.Fatalf("checksum %#x, hash/crc32 says %#x", got, want)
	}
}

func TestReplicateRecordsChecksumMismatch(t *testing.T) {
	m := &ReplicateRecords{Log: LogStream, CorrelationID: 1, Shard: sampleShard(), Payloads: [][]byte{[]byte("hello")}}
	frame, err := AppendInternalFrame(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Clone(frame[InternalHeaderSize:])
	var r ReplicateRecords
	if err := DecodeReplicateRecords(KindReplicateRecords, body, &r); err != nil || !r.ChecksumOK() {
		t.Fatalf("clean decode: %v ok=%v", err, r.ChecksumOK())
	}
	body[len(body)-1] ^= 1 // flip a payload bit
	if err := DecodeReplicateRecords(KindReplicateRecords, body, &r); err != nil || r.ChecksumOK() {
		t.Fatalf("corrupt payload: err %v ok=%v", err, r.ChecksumOK())
	}
	if err := DecodeReplicateRecords(KindReplicateOk, body, &r); !errors.Is(err, ErrMalformed) {
		t.Fatalf("wrong kind: %v", err)
	}
}

func TestForwardRelabelRefused(t *testing.T) {
	s := sampleInternal()
	auth, _ := AppendInternalFrame(nil, s[KindAuthorizedForwardPublish])
	if _, err := DecodeInternal(KindForwardPublish, auth[InternalHeaderSize:]); !errors.Is(err, ErrTrailingBytes) {
		t.Fatalf("authorized relabelled legacy: %v", err)
	}
	legacy, _ := AppendInternalFrame(nil, s[KindForwardPublish])
	if _, err := DecodeInternal(KindAuthorizedForwardPublish, legacy[InternalHeaderSize:]); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("legacy relabelled authorized: %v", err)
	}
	authCache, _ := AppendInternalFrame(nil, s[KindAuthorizedForwardCacheOp])
	if _, err := DecodeInternal(KindForwardCacheOp, authCache[InternalHeaderSize:]); !errors.Is(err, ErrTrailingBytes) {
		t.Fatalf("authorized cache op relabelled legacy: %v", err)
	}
	legacyCache, _ := AppendInternalFrame(nil, s[KindForwardCacheOp])
	if _, err := DecodeInternal(KindAuthorizedForwardCacheOp, legacyCache[InternalHeaderSize:]); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("legacy cache op relabelled authorized: %v", err)
	}
	// An empty credential is no credential.
	empty := &AuthorizedForwardPublish{ForwardPublish: ForwardPublish{CorrelationID: 1, Shard: sampleShard()}}
	if _, err := AppendInternalFrame(nil, empty); !errors.Is(err, ErrMalformed) {
		t.Fatalf("encode empty credential: %v", err)
	}
	body, _ := (&empty.ForwardPublish).AppendBody(nil)
	body = append(body, 0, 0)
	if _, err := DecodeInternal(KindAuthorizedForwardPublish, body); !errors.Is(err, ErrMalformed) {
		t.Fatalf("decode empty credential: %v", err)
	}
}

func TestForwardCacheOkPresence(t *testing.T) {
	for _, m := range []*ForwardCacheOk{
		{CorrelationID: 1},
		{CorrelationID: 2, Present: true, Value: []byte{}},
		{CorrelationID: 3, Present: true, Value: []byte("v")},
	} {
		body, _ := m.AppendBody(nil)
		got, err := DecodeInternal(KindForwardCacheOk, body)
		if err != nil {
			t.Fatal(err)
		}
		g := got.(*ForwardCacheOk)
		if g.Present != m.Present || !bytes.Equal(g.Value, m.Value) || (g.Present && g.Value == nil) {
			t.Fatalf("round trip %+v -> %+v", m, g)
		}
	}
	miss, _ := (&ForwardCacheOk{CorrelationID: 1}).AppendBody(nil)
	empty, _ := (&ForwardCacheOk{CorrelationID: 1, Present: true}).AppendBody(nil)
	if bytes.Equal(miss, empty) {
		t.Fatal("a miss and a stored empty value encode the same")
	}
	bad := append(binary.BigEndian.AppendUint64(nil, 1), 2)
	if _, err := DecodeInternal(KindForwardCacheOk, bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("presence byte 2: %v", err)
	}
}

func TestCounterValues(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 1 << 62, -1 << 63} {
		b := AppendCounterValue(nil, v)
		if len(b) != 8 {
			t.Fatalf("len %d", len(b))
		}
		got, err := DecodeCounterValue(b)
		if err != nil || got != v {
			t.Fatalf("%d -> %d %v", v, got, err)
		}
	}
	if _, err := DecodeCounterValue([]byte{1, 2, 3}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short counter: %v", err)
	}
	if !CacheOpGet.ReadOnly() || !CacheOpCounterGet.ReadOnly() || CacheOpCounterAdd.ReadOnly() || CacheOpDelete.ReadOnly() {
		t.Fatal("ReadOnly classification")
	}
	if CacheOpCounterAdd != 4 || CacheOpCounterGet != 5 {
		t.Fatal("seed op numbers changed")
	}
}

func TestSeedKindNumbers(t *testing.T) {
	want := map[Kind]uint16{KindReplicateBootstrap: 10, KindReplicateGroupRecords: 16, KindReplicateGroupBootstrap: 17,
		KindReplicateDeadLetterRecords: 18, KindReplicateDeadLetterBootstrap: 19, KindReplicateCounterRecords: 20,
		KindReplicateCounterBootstrap: 21, KindAuthorizedForwardPublish: 22, KindAuthorizedForwardCacheOp: 23, KindReplicateRebuild: 24}
	for k, n := range want {
		if uint16(k) != n {
			t.Fatalf("%v = %d, seed says %d", k, k, n)
		}
	}
	if KindReplicateProducerRecords != 30 || KindReplicateProducerBootstrap != 31 || LogProducers != 5 {
		t.Fatal("producer-window kinds are assigned once (docs/internal-protocol.md)")
	}
	for l := LogStream; l <= LogLast; l++ {
		if got, ok := recordsLog(l.RecordsKind()); !ok || got != l {
			t.Fatalf("%v: records kind %v maps back to %v", l, l.RecordsKind(), got)
		}
		if got, ok := bootstrapLog(l.BootstrapKind()); !ok || got != l {
			t.Fatalf("%v: bootstrap kind %v maps back to %v", l, l.BootstrapKind(), got)
		}
	}
	if bad := LogLast + 1; bad.Valid() || bad.RecordsKind().Known() || bad.BootstrapKind().Known() ||
		bad.String() != "ReplicaLog(6)" {
		t.Fatal("an invalid ReplicaLog must stay invalid, never remapped")
	}
	if Kind(9999).String() != "Kind(9999)" || KindFence.String() != "Fence" {
		t.Fatal("Kind.String")
	}
}

func TestInternalValidation(t *testing.T) {
	sh := sampleShard()
	op := &ForwardCacheOp{CorrelationID: 1, Shard: sh, Op: CacheOpGet, Key: []byte("k")}
	body, err := op.AppendBody(nil)
	if err != nil {
		t.Fatal(err)
	}
	opAt := 8 + 2 + 2 + 2 + 7 + 2 + 6 + 4 + 8
	bad := bytes.Clone(body)
	bad[opAt] = 9
	_, err = DecodeInternal(KindForwardCacheOp, bad)
	de, ok := errors.AsType[*DecodeError](err)
	if !ok || !errors.Is(err, ErrMalformed) || de.Field != "op" || de.Offset != opAt {
		t.Fatalf("op 9: %v (want field op at %d)", err, opAt)
	}
	bad = bytes.Clone(body)
	bad[10] = 0xFF // first byte of tenant "t1" -> invalid UTF-8
	if _, err := DecodeInternal(KindForwardCacheOp, bad); !errors.Is(err, ErrInvalidUTF8) {
		t.Fatalf("utf8: %v", err)
	}
	// A payload count larger than remaining/4 is refused before allocating.
	fp := &ForwardPublish{CorrelationID: 1, Shard: sh}
	body, _ = fp.AppendBody(nil)
	binary.BigEndian.PutUint32(body[len(body)-4:], 1<<30)
	if _, err := DecodeInternal(KindForwardPublish, body); !errors.Is(err, ErrMalformed) {
		t.Fatalf("huge count: %v", err)
	}
	if _, err := (&Fence{Shard: sh, Log: 7}).AppendBody(nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("encode bad log: %v", err)
	}
	if _, err := (&Hello{NodeID: make([]byte, 70000)}).AppendBody(nil); !errors.Is(err, ErrTooLong) {
		t.Fatalf("encode long node id: %v", err)
	}
}

func TestReadInternalFrame(t *testing.T) {
	var stream []byte
	s := sampleInternal()
	for k := Kind(0); k.Known(); k++ {
		stream, _ = AppendInternalFrame(stream, s[k])
	}
	r := bytes.NewReader(stream)
	var buf []byte
	for k := Kind(0); k.Known(); k++ {
		h, body, err := ReadInternalFrame(r, buf, DefaultMaxFrameBytes)
		if err != nil || h.Kind != k {
			t.Fatalf("frame %v: %v %v", k, h, err)
		}
		if _, err := DecodeInternal(h.Kind, body); err != nil {
			t.Fatal(err)
		}
		buf = body[:0]
	}
	if _, _, err := ReadInternalFrame(r, buf, DefaultMaxFrameBytes); err == nil || err.Error() != "EOF" {
		t.Fatalf("end: %v", err)
	}
	if _, _, err := ReadInternalFrame(bytes.NewReader(stream[:20]), nil, DefaultMaxFrameBytes); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("cut body: %v", err)
	}
}

func TestReplicateRecordsZeroAlloc(t *testing.T) {
	m := &ReplicateRecords{Log: LogGroupCursors, CorrelationID: 9, Shard: sampleShard(), Epoch: 1, FirstOffset: 2,
		Payloads: [][]byte{[]byte("a"), []byte("bcd"), make([]byte, 300)}}
	frame, err := AppendInternalFrame(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	var dst ReplicateRecords
	_ = DecodeReplicateRecords(KindReplicateGroupRecords, frame[InternalHeaderSize:], &dst)
	buf := make([]byte, 0, len(frame))
	allocs := testing.AllocsPerRun(50, func() {
		buf, _ = AppendInternalFrame(buf[:0], m)
		if err := DecodeReplicateRecords(KindReplicateGroupRecords, buf[InternalHeaderSize:], &dst); err != nil || !dst.ChecksumOK() {
			t.Fatal("decode failed")
		}
	})
	if allocs != 0 {
		t.Fatalf("ReplicateRecords encode+decode+verify allocated %v times", allocs)
	}
	if !reflect.DeepEqual(dst.Payloads, m.Payloads) || dst.Log != LogGroupCursors {
		t.Fatal("round trip")
	}
}
