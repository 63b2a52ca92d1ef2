package proto

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"testing"
)

func TestDecodeHeaderOrder(t *testing.T) {
	good := AppendHeader(nil, FlagBinaryPublishBatch, 5)
	if h, err := DecodeHeader(good, DefaultMaxFrameBytes); err != nil || h.Flags != 1 || h.Length != 5 {
		t.Fatalf("%+v %v", h, err)
	}
	// Each case breaks several things at once; the first in spec order must win.
	bad := func(magic uint32, version, flags uint16, length uint32) []byte {
		b := binary.BigEndian.AppendUint32(nil, magic)
		b = binary.BigEndian.AppendUint16(b, version)
		b = binary.BigEndian.AppendUint16(b, flags)
		return binary.BigEndian.AppendUint32(b, length)
	}
	cases := []struct {
		name  string
		b     []byte
		want  error
		field string
	}{
		{"short beats everything", bad(0, 9, 0xFFFF, 1<<31)[:11], ErrIncomplete, "header"},
		{"magic before version", bad(InternalMagic, 9, 0xFFFF, 1<<31), ErrInvalidMagic, "magic"},
		{"version before flags", bad(Magic, 2, 0x8000, 1<<31), ErrUnsupportedVersion, "version"},
		{"flags before length", bad(Magic, 1, 0x0040, 1<<31), ErrUnknownFlags, "flags"},
		{"reserved 0x0400 refused", bad(Magic, 1, 0x0400, 0), ErrUnknownFlags, "flags"},
		{"0x8000 with a reserved bit refused", bad(Magic, 1, 0x8100, 0), ErrUnknownFlags, "flags"},
		{"length", bad(Magic, 1, 0x0001, DefaultMaxFrameBytes+1), ErrFrameTooLarge, "length"},
	}
	for _, tc := range cases {
		_, err := DecodeHeader(tc.b, DefaultMaxFrameBytes)
		de, ok := errors.AsType[*DecodeError](err)
		if !ok || !errors.Is(err, tc.want) || de.Field != tc.field {
			t.Errorf("%s: %v, want %v in field %s", tc.name, err, tc.want, tc.field)
		}
	}
	// The bound is a parameter.
	if _, err := DecodeHeader(bad(Magic, 1, 0, 100), 99); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatal("custom max ignored")
	}
	if _, err := DecodeHeader(bad(Magic, 1, 0, 99), 99); err != nil {
		t.Fatal(err)
	}
}

func TestFlagConstants(t *testing.T) {
	if OriginalV1Flags != 0x0007 || KnownFlagsV1 != 0x003F || KnownFlags != 0xF83F {
		t.Fatalf("flag sets %#x %#x %#x", OriginalV1Flags, KnownFlagsV1, KnownFlags)
	}
	valid := map[uint16]Layout{
		0x0000: LayoutJSON, 0x0001: LayoutPublishBatch, 0x0009: LayoutAckedPublishBatch, 0x2009: LayoutAckedPublishBatch,
		0x0010: LayoutPublishAck, 0x0002: LayoutEventBatch, 0x0022: LayoutEventBatch, 0x0004: LayoutSharedEventBatch,
		0x0024: LayoutSharedEventBatch, 0x0824: LayoutSharedEventBatch, 0x0822: LayoutEventBatch,
		0x1004: LayoutSharedEventBatch, 0x1824: LayoutSharedEventBatch, 0x1002: LayoutEventBatch,
		0x4001: LayoutPublishBatch, 0x4009: LayoutAckedPublishBatch, 0x6009: LayoutAckedPublishBatch,
		0x8000: LayoutGroupRecords,
	}
	for f, want := range valid {
		if got, err := ClassifyFlags(f); err != nil || got != want {
			t.Errorf("%#04x: %v %v, want %v", f, got, err, want)
		}
	}
	for _, f := range []uint16{0x0008, 0x0020, 0x0800, 0x0804, 0x2001, 0x2000, 0x0003, 0x0006, 0x0011, 0x0019, 0x1001, 0x0021, 0x4000, 0x4008, 0x6001, 0x4010, 0x4004, 0x6000, 0x8001, 0x8004, 0x8020, 0xC000} {
		if _, err := ClassifyFlags(f); !errors.Is(err, ErrFlagCombination) {
			t.Errorf("%#04x: %v, want ErrFlagCombination", f, err)
		}
	}
	if _, err := ClassifyFlags(0x8040); !errors.Is(err, ErrUnknownFlags) {
		t.Errorf("0x8040: %v", err)
	}
}

func TestReadFrame(t *testing.T) {
	var stream []byte
	stream = AppendMessage(stream, &OK{})
	stream = AppendSharedEventBatch(stream, 5, true, [][]byte{[]byte("a"), []byte("bc")})
	r := bytes.NewReader(stream)
	buf := make([]byte, 0, 64)
	h, body, err := ReadFrame(r, buf, DefaultMaxFrameBytes)
	if err != nil || h.Flags != 0 || string(body) != `{"type":"ok"}` {
		t.Fatalf("%v %q %v", h, body, err)
	}
	if &body[0] != &buf[:1][0] {
		t.Fatal("body did not reuse buf")
	}
	h, body, err = ReadFrame(r, body[:0], DefaultMaxFrameBytes)
	if err != nil || h.Flags != 0x0024 {
		t.Fatalf("%v %v", h, err)
	}
	if _, _, err := ReadFrame(r, body[:0], DefaultMaxFrameBytes); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	for cut := 1; cut < len(stream)-1; cut++ {
		r := bytes.NewReader(stream[:cut])
		var err error
		for err == nil {
			_, _, err = ReadFrame(r, nil, DefaultMaxFrameBytes)
		}
		if err != io.EOF && !errors.Is(err, ErrIncomplete) {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if cut != 25 && err == io.EOF { // 25 = end of the first frame
			t.Fatalf("cut %d reported a clean end", cut)
		}
	}
	// Length over the bound is refused before the body is read.
	big := AppendHeader(nil, 0, 1000)
	if _, _, err := ReadFrame(bytes.NewReader(big), nil, 999); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("too large: %v", err)
	}
}

// TestSpecEventBatchExamples checks the derived examples of spec/client-protocol.md §5.5.
func TestSpecEventBatchExamples(t *testing.T) {
	payloads := [][]byte{[]byte("a"), []byte("bc")}
	cases := []struct {
		hex string
		enc []byte
	}{
		{"464c5831 0001 0004 0000000f 00000002 00000001 61 00000002 6263", AppendSharedEventBatch(nil, 0, false, payloads)},
		{"464c5831 0001 0024 00000017 0000000000000005 00000002 00000001 61 00000002 6263", AppendSharedEventBatch(nil, 5, true, payloads)},
		{"464c5831 0001 0002 00000017 0000000000000007 00000002 00000001 61 00000002 6263", AppendLegacyEventBatch(nil, 7, 0, false, payloads)},
		{"464c5831 0001 0022 0000001f 0000000000000007 0000000000000005 00000002 00000001 61 00000002 6263", AppendLegacyEventBatch(nil, 7, 5, true, payloads)},
	}
	for _, tc := range cases {
		want, err := hex.DecodeString(string(bytes.ReplaceAll([]byte(tc.hex), []byte(" "), nil)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tc.enc, want) {
			t.Fatalf("encoded %x\nwant    %x", tc.enc, want)
		}
		h, err := DecodeHeader(want, DefaultMaxFrameBytes)
		if err != nil {
			t.Fatal(err)
		}
		var e EventBatch
		if err := DecodeEventBatch(h.Flags, want[HeaderSize:], &e); err != nil {
			t.Fatal(err)
		}
		again, err := AppendEventBatch(nil, &e)
		if err != nil || !bytes.Equal(again, want) {
			t.Fatalf("decode/encode %x %v", again, err)
		}
		if len(e.Payloads) != 2 || string(e.Payloads[1]) != "bc" {
			t.Fatalf("payloads %q", e.Payloads)
		}
	}
}

func TestEventBatchModifiers(t *testing.T) {
	cases := []EventBatch{
		{Shared: true, WithOffsets: true, BaseOffset: 10, SkippedBefore: 1, Payloads: [][]byte{[]byte("x")}},
		{SubscriptionID: 3, WithOffsets: true, BaseOffset: 10, SkippedBefore: 2, Payloads: [][]byte{[]byte("x")}},
		{Shared: true, WithPublishers: true, Publishers: [][]byte{[]byte("alice"), {}}, Payloads: [][]byte{[]byte("x"), []byte("yz")}},
		{SubscriptionID: 4, WithOffsets: true, BaseOffset: 1, SkippedBefore: 1, WithPublishers: true, Publishers: [][]byte{[]byte("p")}, Payloads: [][]byte{{}}},
		{Shared: true, Payloads: [][]byte{}},
	}
	for i := range cases {
		in := &cases[i]
		frame, err := AppendEventBatch(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		h, err := DecodeHeader(frame, DefaultMaxFrameBytes)
		if err != nil || h.Flags != in.Flags() {
			t.Fatalf("case %d: %v %v", i, h, err)
		}
		var out EventBatch
		if err := DecodeEventBatch(h.Flags, frame[HeaderSize:], &out); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		again, _ := AppendEventBatch(nil, &out)
		if !bytes.Equal(again, frame) || out.SkippedBefore != in.SkippedBefore || out.WithPublishers != in.WithPublishers {
			t.Fatalf("case %d: round trip %+v", i, out)
		}
	}
	// Shared layout with skipped: base_offset then skipped_before then count.
	f, _ := AppendEventBatch(nil, &cases[0])
	if got := binary.BigEndian.Uint64(f[HeaderSize+8:]); got != 1 || binary.BigEndian.Uint16(f[6:]) != 0x0824 {
		t.Fatalf("skipped layout %x", f)
	}
	if _, err := AppendEventBatch(nil, &EventBatch{Shared: true, SkippedBefore: 1}); !errors.Is(err, ErrMalformed) {
		t.Fatal("skipped without offsets encoded")
	}
	if _, err := AppendEventBatch(nil, &EventBatch{Shared: true, WithPublishers: true, Payloads: [][]byte{{}}}); !errors.Is(err, ErrMalformed) {
		t.Fatal("publisher count mismatch encoded")
	}
	body := f[HeaderSize:]
	zero := bytes.Clone(body)
	binary.BigEndian.PutUint64(zero[8:], 0)
	var e EventBatch
	if err := DecodeEventBatch(0x0824, zero, &e); !errors.Is(err, ErrMalformed) {
		t.Fatalf("skipped_before 0 with 0x0800: %v", err)
	}
	if err := DecodeEventBatch(0x0001, body, &e); !errors.Is(err, ErrFlagCombination) {
		t.Fatalf("publish flags on event decoder: %v", err)
	}
}

func TestPublishBatchLayouts(t *testing.T) {
	in := PublishBatch{TenantID: []byte("t1"), Namespace: []byte("default"), Stream: []byte("demo"), Payloads: [][]byte{[]byte("hello"), {}}}
	frame, err := AppendPublishBatch(nil, &in)
	if err != nil || binary.BigEndian.Uint16(frame[6:]) != 0x0001 {
		t.Fatal(err)
	}
	var out PublishBatch
	if err := DecodePublishBatch(frame[HeaderSize:], &out); err != nil || out.Acked || len(out.Payloads) != 2 || string(out.Stream) != "demo" {
		t.Fatalf("%+v %v", out, err)
	}
	idem := in
	idem.Acked, idem.RequestID, idem.AckMode, idem.ProducerID = true, 77, AckPerMessage, []byte("prod-1")
	frame, err = AppendPublishBatch(nil, &idem)
	if err != nil || binary.BigEndian.Uint16(frame[6:]) != 0x2009 {
		t.Fatalf("flags %x %v", frame[6:8], err)
	}
	if frame[HeaderSize+9] != 6 || string(frame[HeaderSize+10:HeaderSize+16]) != "prod-1" {
		t.Fatalf("producer id layout %x", frame)
	}
	if err := DecodeAckedPublishBatch(frame[HeaderSize:], true, &out); err != nil || string(out.ProducerID) != "prod-1" || out.RequestID != 77 {
		t.Fatalf("%+v %v", out, err)
	}
	// Malformed rest after a good prefix: request id still known.
	body := bytes.Clone(frame[HeaderSize:])
	body = body[:len(body)-1]
	err = DecodeAckedPublishBatch(body, true, &out)
	if !errors.Is(err, ErrIncomplete) || !out.Acked || out.RequestID != 77 {
		t.Fatalf("prefix not kept: %+v %v", out, err)
	}
	bad := bytes.Clone(frame[HeaderSize:])
	bad[8] = 3
	p, err := DecodeAckedPrefix(bad)
	if !errors.Is(err, ErrMalformed) || p.RequestID != 77 {
		t.Fatalf("ack_mode 3: %+v %v", p, err)
	}
	if _, err := DecodeAckedPrefix(bad[:8]); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("short prefix: %v", err)
	}
	// Count larger than remaining/4 is refused before allocating.
	hostile := AppendHeader(nil, 1, 0)[:0]
	hostile = append(hostile, 0, 0, 0, 0, 0, 0)
	hostile = binary.BigEndian.AppendUint32(hostile, 0xFFFFFFFF)
	allocs := testing.AllocsPerRun(10, func() {
		var pb PublishBatch
		if err := DecodePublishBatch(hostile, &pb); !errors.Is(err, ErrMalformed) {
			t.Fatalf("hostile count: %v", err)
		}
	})
	if allocs > 1 { // the error value itself
		t.Fatalf("hostile count allocated %v times", allocs)
	}
	// Names must be UTF-8.
	u := bytes.Clone(frame[HeaderSize:])
	u[16+2] = 0xC3 // first byte of "t1"
	if err := DecodeAckedPublishBatch(u, true, &out); !errors.Is(err, ErrInvalidUTF8) {
		t.Fatalf("utf8: %v", err)
	}
	// Trailing bytes refused.
	tr := append(bytes.Clone(frame[HeaderSize:]), 0)
	if err := DecodeAckedPublishBatch(tr, true, &out); !errors.Is(err, ErrTrailingBytes) {
		t.Fatalf("trailing: %v", err)
	}
}

func TestKeyedPublishBatch(t *testing.T) {
	base := PublishBatch{TenantID: []byte("t1"), Namespace: []byte("default"), Stream: []byte("demo"), Payloads: [][]byte{[]byte("hello"), {}}}
	cases := []struct {
		name  string
		edit  func(*PublishBatch)
		flags uint16
		keyAt int // body offset of key_len
	}{
		{"unacked", func(*PublishBatch) {}, 0x4001, 0},
		{"acked", func(b *PublishBatch) { b.Acked, b.RequestID, b.AckMode = true, 9, AckPerBatch }, 0x4009, 9},
		{"idempotent", func(b *PublishBatch) {
			b.Acked, b.RequestID, b.AckMode, b.ProducerID = true, 9, AckPerMessage, []byte("prod")
		}, 0x6009, 9 + 1 + 4},
	}
	for _, tc := range cases {
		in := base
		tc.edit(&in)
		in.Key = []byte{0, 'k', 0xFF} // opaque bytes, not UTF-8
		frame, err := AppendPublishBatch(nil, &in)
		if err != nil || binary.BigEndian.Uint16(frame[6:]) != tc.flags {
			t.Fatalf("%s: flags %x %v", tc.name, frame[6:8], err)
		}
		body := frame[HeaderSize:]
		if binary.BigEndian.Uint16(body[tc.keyAt:]) != 3 || !bytes.Equal(body[tc.keyAt+2:tc.keyAt+5], in.Key) ||
			binary.BigEndian.Uint16(body[tc.keyAt+5:]) != 2 { // then tenant_len of "t1"
			t.Fatalf("%s: key layout %x", tc.name, body)
		}
		var out PublishBatch
		if err := DecodePublish(tc.flags, body, &out); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !bytes.Equal(out.Key, in.Key) || &out.Key[0] != &body[tc.keyAt+2] || out.RequestID != in.RequestID ||
			!bytes.Equal(out.ProducerID, in.ProducerID) || string(out.Stream) != "demo" || len(out.Payloads) != 2 {
			t.Fatalf("%s: decoded %+v", tc.name, out)
		}
		again, _ := AppendPublishBatch(nil, &out)
		if !bytes.Equal(again, frame) {
			t.Fatalf("%s: re-encode differs", tc.name)
		}
		// The same body without its modifier bit does not decode (the key bytes are not names).
		if err := DecodePublish(tc.flags&^FlagPublishKeyed, body, &out); err == nil {
			t.Fatalf("%s: decoded keyed body as unkeyed", tc.name)
		}
		// key_len beyond the body: typed error, request id still known.
		short := bytes.Clone(body[:tc.keyAt+4])
		err = DecodePublish(tc.flags, short, &out)
		var de *DecodeError
		if !errors.As(err, &de) || !errors.Is(err, ErrIncomplete) || de.Field != "key" || de.Offset != tc.keyAt+2 {
			t.Fatalf("%s: short key: %v", tc.name, err)
		}
		if out.RequestID != in.RequestID || out.Key != nil {
			t.Fatalf("%s: after short key %+v", tc.name, out)
		}
		// 0x4000 set but no room for key_len at all.
		err = DecodePublish(tc.flags, bytes.Clone(body[:tc.keyAt+1]), &out)
		if !errors.As(err, &de) || !errors.Is(err, ErrIncomplete) || de.Field != "key" {
			t.Fatalf("%s: no key room: %v", tc.name, err)
		}
		// key_len 0 and key_len above MaxKeyLen are malformed.
		for _, n := range []uint16{0, MaxKeyLen + 1} {
			bad := bytes.Clone(body)
			binary.BigEndian.PutUint16(bad[tc.keyAt:], n)
			if err := DecodePublish(tc.flags, bad, &out); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: key_len %d: %v", tc.name, n, err)
			}
		}
	}
	// An unkeyed decode clears a key left from the previous frame.
	var out PublishBatch
	out.Key = []byte("stale")
	plain, _ := AppendPublishBatch(nil, &base)
	if err := DecodePublish(0x0001, plain[HeaderSize:], &out); err != nil || out.Key != nil {
		t.Fatalf("stale key: %q %v", out.Key, err)
	}
	// Encoder bounds.
	long := base
	long.Key = bytes.Repeat([]byte("k"), MaxKeyLen+1)
	if got, err := AppendPublishBatch([]byte("x"), &long); !errors.Is(err, ErrTooLong) || string(got) != "x" {
		t.Fatalf("long key: %v", err)
	}
	long.Key = long.Key[:MaxKeyLen]
	frame, err := AppendPublishBatch(nil, &long)
	if err != nil {
		t.Fatal(err)
	}
	if err := DecodePublish(0x4001, frame[HeaderSize:], &out); err != nil || len(out.Key) != MaxKeyLen {
		t.Fatalf("max key: %v", err)
	}
	// Decoding a keyed frame into a reused batch allocates nothing.
	body := frame[HeaderSize:]
	if allocs := testing.AllocsPerRun(100, func() {
		if err := DecodePublish(0x4001, body, &out); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("keyed decode allocated %v times", allocs)
	}
}

func TestDecodePublishBatchZeroAlloc(t *testing.T) {
	payloads := make([][]byte, 64)
	for i := range payloads {
		payloads[i] = bytes.Repeat([]byte{byte(i)}, 1024)
	}
	frame, _ := AppendPublishBatch(nil, &PublishBatch{TenantID: []byte("t1"), Namespace: []byte("ns"), Stream: []byte("s"), Payloads: payloads})
	body := frame[HeaderSize:]
	var dst PublishBatch
	if err := DecodePublishBatch(body, &dst); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := DecodePublishBatch(body, &dst); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("DecodePublishBatch allocated %v times per run", allocs)
	}
	if &dst.Payloads[3][0] != &body[len(body)-61*1028+4] {
		t.Fatal("payload is not a sub-slice of the body")
	}
	buf := make([]byte, 0, len(frame))
	allocs = testing.AllocsPerRun(100, func() {
		buf, _ = AppendPublishBatch(buf[:0], &dst)
	})
	if allocs != 0 || !bytes.Equal(buf, frame) {
		t.Fatalf("AppendPublishBatch allocated %v times", allocs)
	}
	var ev EventBatch
	evFrame := AppendSharedEventBatch(nil, 9, true, payloads)
	allocs = testing.AllocsPerRun(100, func() {
		evFrame = AppendSharedEventBatch(evFrame[:0], 9, true, payloads)
		if err := DecodeEventBatch(0x0024, evFrame[HeaderSize:], &ev); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("event batch encode+decode allocated %v times", allocs)
	}
}

func TestPublishAck(t *testing.T) {
	f := AppendPublishAckError(nil, 5, ErrorText(CodeNotLeader, "moved"))
	var a PublishAck
	if err := DecodePublishAck(f[HeaderSize:], &a); err != nil || a.Status != AckStatusError {
		t.Fatal(err)
	}
	code, detail := SplitErrorText(string(a.Message))
	if code != CodeNotLeader || detail != "moved" {
		t.Fatalf("%q %q", code, detail)
	}
	if c, d := SplitErrorText("stream not found"); c != "" || d != "stream not found" {
		t.Fatalf("v1 text split: %q %q", c, d)
	}
	if c, _ := SplitErrorText("Bad Thing: x"); c != "" {
		t.Fatal("non-code prefix taken as a code")
	}
	ok := AppendPublishAckOK(nil, 1)
	b := bytes.Clone(ok[HeaderSize:])
	b[0] = 2
	if err := DecodePublishAck(b, &a); !errors.Is(err, ErrMalformed) {
		t.Fatalf("status 2: %v", err)
	}
	if err := DecodePublishAck(ok[HeaderSize:HeaderSize+10], &a); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("short ack: %v", err)
	}
	long := AppendPublishAckError(nil, 1, string(bytes.Repeat([]byte("é"), 40000)))
	if err := DecodePublishAck(long[HeaderSize:], &a); err != nil || len(a.Message) > 0xFFFF {
		t.Fatalf("long message: %v len %d", err, len(a.Message))
	}
	if !CodeOverloaded.Retryable() || CodeUnauthorized.Retryable() || CodeIndeterminate.Retryable() {
		t.Fatal("Retryable")
	}
}

func TestDecodePublishDispatch(t *testing.T) {
	for _, in := range []PublishBatch{
		{TenantID: []byte("t"), Namespace: []byte("n"), Stream: []byte("s"), Payloads: [][]byte{[]byte("x")}},
		{Acked: true, RequestID: 4, AckMode: AckPerMessage, TenantID: []byte("t"), Namespace: []byte("n"), Stream: []byte("s"), Payloads: [][]byte{}},
		{Acked: true, RequestID: 5, AckMode: AckPerBatch, ProducerID: []byte("p"), TenantID: []byte("t"), Namespace: []byte("n"), Stream: []byte("s"), Payloads: [][]byte{{}}},
	} {
		f, err := AppendPublishBatch(nil, &in)
		if err != nil {
			t.Fatal(err)
		}
		var out PublishBatch
		if err := DecodePublish(in.Flags(), f[HeaderSize:], &out); err != nil {
			t.Fatal(err)
		}
		if out.Flags() != in.Flags() || out.RequestID != in.RequestID || !bytes.Equal(out.ProducerID, in.ProducerID) || len(out.Payloads) != len(in.Payloads) {
			t.Fatalf("dispatch %+v -> %+v", in, out)
		}
	}
	var out PublishBatch
	if err := DecodePublish(0x0024, nil, &out); !errors.Is(err, ErrFlagCombination) {
		t.Fatalf("event flags: %v", err)
	}
	if err := DecodePublish(0x0040, nil, &out); !errors.Is(err, ErrUnknownFlags) {
		t.Fatalf("unknown flags: %v", err)
	}
}

func TestEncodersKeepOutputDecodable(t *testing.T) {
	f := AppendPublishAckError(nil, 1, "bad \xff byte")
	var a PublishAck
	if err := DecodePublishAck(f[HeaderSize:], &a); err != nil || string(a.Message) != "bad \uFFFD byte" {
		t.Fatalf("%q %v", a.Message, err)
	}
	if _, err := AppendEventBatch(nil, &EventBatch{Shared: true, WithPublishers: true, Publishers: [][]byte{{0xff}}, Payloads: [][]byte{{}}}); !errors.Is(err, ErrInvalidUTF8) {
		t.Fatalf("invalid publisher: %v", err)
	}
	if _, err := AppendPublishBatch(nil, &PublishBatch{TenantID: []byte{0xff}}); !errors.Is(err, ErrInvalidUTF8) {
		t.Fatalf("invalid tenant: %v", err)
	}
	if _, err := AppendPublishBatch(nil, &PublishBatch{Stream: make([]byte, 70000)}); !errors.Is(err, ErrTooLong) {
		t.Fatalf("long stream: %v", err)
	}
	if _, err := AppendPublishBatch(nil, &PublishBatch{Acked: true, AckMode: 0}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("ack mode 0: %v", err)
	}
}
