package seglog

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// goldenBlocks returns the fenced code blocks of vectors/storage/golden.md.
func goldenBlocks(t *testing.T) (blocks []string, md string) {
	b, err := os.ReadFile(filepath.Join(vectorsDir(t), "storage", "golden.md"))
	if err != nil {
		t.Fatal(err)
	}
	md = string(b)
	parts := strings.Split(md, "```")
	for i := 1; i < len(parts); i += 2 {
		blocks = append(blocks, strings.TrimSpace(parts[i]))
	}
	return blocks, md
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func TestGoldenV2(t *testing.T) {
	blocks, md := goldenBlocks(t)
	if len(blocks) != 7 {
		t.Fatalf("golden.md has %d code blocks, want 7", len(blocks))
	}
	cases := []struct {
		name string
		got  []byte
		want string
	}{
		{"§1 segment header", AppendSegmentHeader(nil, SegmentHeader{Version: 2, BaseOffset: 1, CreatedAtMicros: 2}), blocks[0]},
		{"§2 record", AppendRecord(nil, 2, &Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi")}), blocks[1]},
		{"§3a empty record", AppendRecord(nil, 2, &Record{Offset: 8, TimestampMicros: 10}), blocks[2]},
		{"§3c index header", AppendIndexHeader(nil, 2, 7), blocks[5]},
		{"§3c first entry", AppendIndexEntry(nil, IndexEntry{Offset: 7, Position: 32}), blocks[6]},
	}
	seg := AppendSegmentHeader(nil, SegmentHeader{Version: 2, BaseOffset: 7, CreatedAtMicros: 2})
	seg = AppendRecord(seg, 2, &Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi")})
	seg = AppendRecord(seg, 2, &Record{Offset: 8, TimestampMicros: 10})
	cases = append(cases, struct {
		name string
		got  []byte
		want string
	}{"§3b two-record segment", seg, blocks[4]})
	for _, c := range cases {
		if want := unhex(t, c.want); string(c.got) != string(want) {
			t.Errorf("%s:\n got %x\nwant %x", c.name, c.got, want)
		}
	}
	// The §3b file decodes back, through the same scanner recovery uses.
	h, err := DecodeSegmentHeader(seg)
	if err != nil || h.BaseOffset != 7 || h.Version != 2 {
		t.Fatalf("header %+v %v", h, err)
	}
	r, n, err := DecodeRecord(seg[32:], 2)
	if err != nil || n != 30 || string(r.Payload) != "hi" || r.Offset != 7 || r.TimestampMicros != 9 {
		t.Fatalf("record %+v %d %v", r, n, err)
	}
	rows := regexp.MustCompile("\\| (\\w+) \\| (\\w+) \\| (\\w+) \\| (\\d+) \\| `([^`]+)` \\|").FindAllStringSubmatch(md, -1)
	if len(rows) != 2 {
		t.Fatalf("found %d directory rows", len(rows))
	}
	for _, row := range rows {
		shard, _ := strconv.Atoi(row[4])
		if got := V1ShardDirName(row[1], row[2], row[3], uint32(shard)); got != row[5] {
			t.Errorf("dir name %v: got %s", row[1:5], got)
		}
	}
}

// Our own goldens for versions 3..6 (docs/storage-format.md §"Golden bytes");
// the v3 record was cross-checked with Python's zlib.crc32.
var ownGoldens = []struct {
	name string
	got  func() []byte
	hex  string
}{
	{"v3 segment header", func() []byte {
		return AppendSegmentHeader(nil, SegmentHeader{Version: 3, BaseOffset: 1, CreatedAtMicros: 2})
	}, "464c53470003000000000000000000010000000000000002adeb65e900000000"},
	{"v3 record", func() []byte {
		return AppendRecord(nil, 3, &Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi")})
	}, "0000000200000000000000070000000000000009000000003766af743cd8f98d6869"},
	{"v3 empty record", func() []byte { return AppendRecord(nil, 3, &Record{Offset: 8, TimestampMicros: 10}) },
		"000000000000000000000008000000000000000a00000000b37201ec1b5b70b1"},
	{"v4 generation start", func() []byte {
		return AppendRecord(nil, 4, &Record{Offset: 7, TimestampMicros: 9, Kind: KindGenerationStart,
			Payload: []byte{0, 0, 0, 0, 0, 0, 0, 5, 0, 2, 'n', '1'}})
	}, "0000000c00000000000000070000000000000009010000005c15c4a11a8e7969000000000000000500026e31"},
	{"v5 commit marker", func() []byte {
		return AppendRecord(nil, 5, &Record{Offset: 7, TimestampMicros: 9, Kind: KindCommitMarker})
	}, "00000000000000000000000700000000000000090200000079ab6682bd6fc93e"},
	{"v6 record with publisher", func() []byte {
		return AppendRecord(nil, 6, &Record{Offset: 7, TimestampMicros: 9, Publisher: []byte("ab"), Payload: []byte("hi")})
	}, "0000000500000000000000070000000000000009000100005f43431bdafdeac40261626869"},
	{"v3 index header", func() []byte { return AppendIndexHeader(nil, 3, 7) }, "464c53490003000000000000000000070000000000000000"},
	{"epochs", func() []byte { return EncodeEpochs([]Epoch{{1, 0}, {2, 7}}) },
		"464c53450001000000020000000000000001000000000000000000000000000000020000000000000007719f9b44"},
	{"run-state clean", func() []byte {
		var id StorageID
		for i := range id {
			id[i] = byte(i)
		}
		return EncodeRunState(true, id)
	}, "464c535201000102030405060708090a0b0c0d0e0f6c2364af"},
}

func TestOwnGoldens(t *testing.T) {
	for _, g := range ownGoldens {
		if got := hex.EncodeToString(g.got()); got != g.hex {
			t.Errorf("%s:\n got %s\nwant %s", g.name, got, g.hex)
		}
	}
	var buf [64]byte
	putRecordV3(buf[:34], 7, 9, []byte("hi"))
	if hex.EncodeToString(buf[:34]) != ownGoldens[1].hex {
		t.Fatal("putRecordV3 differs from AppendRecord")
	}
}

func TestDecodeRecordVersions(t *testing.T) {
	for v := uint16(2); v <= 6; v++ {
		r := Record{Offset: 3, TimestampMicros: 4, Payload: []byte("payload")}
		if v >= 4 {
			r.Kind = KindGenerationStart
		}
		if v >= 5 {
			r.Kind = KindCommitMarker
		}
		if v == 6 {
			r.Publisher = []byte("svc-a")
		}
		if v == 2 || v == 3 {
			r.Kind = KindData
		}
		b := AppendRecord(nil, v, &r)
		got, n, err := DecodeRecord(b, v)
		if err != nil || n != len(b) || string(got.Payload) != "payload" || got.Kind != r.Kind || string(got.Publisher) != string(r.Publisher) {
			t.Fatalf("v%d: %+v %d %v", v, got, n, err)
		}
		if v >= 4 && v < 6 {
			if _, _, err := DecodeRecord(b, v-1); err == nil && v-1 >= 3 {
				t.Fatalf("v%d record accepted in a v%d segment", v, v-1)
			}
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	good := AppendRecord(nil, 3, &Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi")})
	kind := func(err error) CorruptionKind {
		var ce *CorruptionError
		if !errors.As(err, &ce) {
			t.Fatalf("not a CorruptionError: %v", err)
		}
		return ce.Kind
	}
	flip := func(i int) []byte { b := append([]byte(nil), good...); b[i] ^= 1; return b }
	if _, _, err := DecodeRecord(good[:20], 3); kind(err) != CorruptTruncated {
		t.Fatal(err)
	}
	if _, _, err := DecodeRecord(good[:33], 3); kind(err) != CorruptTruncated {
		t.Fatal(err)
	}
	if _, _, err := DecodeRecord(flip(5), 3); kind(err) != CorruptRecordHeaderChecksum {
		t.Fatal(err)
	}
	if _, _, err := DecodeRecord(flip(33), 3); kind(err) != CorruptRecordChecksum {
		t.Fatal(err)
	}
	if _, _, err := DecodeRecord(make([]byte, 40), 3); kind(err) != CorruptRecordHeaderChecksum {
		t.Fatal(err)
	}
	huge := AppendRecord(nil, 3, &Record{Offset: 1})
	huge[0] = 0x10 // payload_len 256 MiB, header CRC recomputed
	copy(huge[24:28], be32(crcIEEE(huge[:24])))
	if _, _, err := DecodeRecord(huge, 3); kind(err) != CorruptRecordTooLarge {
		t.Fatal(err)
	}
	if _, _, err := DecodeRecord(good, 7); !errors.Is(err, ErrCorruption) {
		t.Fatal(err)
	}
	for v, want := range map[uint16]CorruptionKind{1: CorruptSegmentVersion, 7: CorruptSegmentVersion} {
		h := AppendSegmentHeader(nil, SegmentHeader{Version: v})
		if _, err := DecodeSegmentHeader(h); kind(err) != want {
			t.Fatalf("version %d: %v", v, err)
		}
	}
	h := AppendSegmentHeader(nil, SegmentHeader{Version: 3})
	h[0] = 'X'
	if _, err := DecodeSegmentHeader(h); kind(err) != CorruptSegmentMagic {
		t.Fatal(err)
	}
	h = AppendSegmentHeader(nil, SegmentHeader{Version: 3})
	h[7] = 1
	if _, err := DecodeSegmentHeader(h); kind(err) != CorruptSegmentHeaderChecksum {
		t.Fatal(err)
	}
	copy(h[24:28], be32(crcIEEE(h[:24])))
	if _, err := DecodeSegmentHeader(h); kind(err) != CorruptSegmentFlags {
		t.Fatal(err)
	}
}

func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

// TestZeroChecksumRecordIsARecord forges a payload whose record checksum is 0
// and checks that recovery keeps it (only a whole zero header ends data).
func TestZeroChecksumRecordIsARecord(t *testing.T) {
	payload := forgeZeroChecksum(t, 0, 5, []byte("forged-"))
	b := AppendRecord(nil, 3, &Record{Offset: 0, TimestampMicros: 5, Payload: payload})
	if b[28]|b[29]|b[30]|b[31] != 0 {
		t.Fatalf("checksum not zero: %x", b[28:32])
	}
	dir := t.TempDir()
	d := NewDisk(newRing(t), nil)
	l, err := d.Open(Options{Dir: dir, FsyncMode: FsyncOnCommit})
	if err != nil {
		t.Fatal(err)
	}
	appendWait(t, d, l, 5, payload)
	appendWait(t, d, l, 5, []byte("after"))
	l.Close()
	l, err = d.Open(Options{Dir: dir, VerifyAllOnOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := readAll(t, l, 0); len(got) != 2 || got[0].payload != string(payload) {
		t.Fatalf("got %v", got)
	}
}

// forgeZeroChecksum returns prefix ‖ 4 bytes such that the v3 record (off, ts,
// payload) has checksum 0: the CRC is affine in those 4 bytes, so solve over GF(2).
func forgeZeroChecksum(t *testing.T, off uint64, ts int64, prefix []byte) []byte {
	sum := func(x uint32) uint32 {
		p := append(append([]byte(nil), prefix...), be32(x)...)
		b := AppendRecord(nil, 3, &Record{Offset: off, TimestampMicros: ts, Payload: p})
		return uint32(b[28])<<24 | uint32(b[29])<<16 | uint32(b[30])<<8 | uint32(b[31])
	}
	c0 := sum(0)
	var cols [32]uint32
	for i := range cols {
		cols[i] = sum(1<<i) ^ c0
	}
	// Solve Σ x_i·cols[i] = c0 by Gaussian elimination on the augmented rows.
	var rows [32]uint64 // bit i (0..31): coefficient of x_i; bit 32: right-hand side
	for r := 0; r < 32; r++ {
		for i := 0; i < 32; i++ {
			if cols[i]>>r&1 == 1 {
				rows[r] |= 1 << i
			}
		}
		if c0>>r&1 == 1 {
			rows[r] |= 1 << 32
		}
	}
	for col, r := 0, 0; col < 32; col++ {
		p := -1
		for k := r; k < 32; k++ {
			if rows[k]>>col&1 == 1 {
				p = k
				break
			}
		}
		if p < 0 {
			t.Fatal("singular CRC system")
		}
		rows[r], rows[p] = rows[p], rows[r]
		for k := 0; k < 32; k++ {
			if k != r && rows[k]>>col&1 == 1 {
				rows[k] ^= rows[r]
			}
		}
		r++
	}
	var x uint32
	for i := 0; i < 32; i++ {
		if rows[i]>>32&1 == 1 {
			x |= 1 << i
		}
	}
	if sum(x) != 0 {
		t.Fatalf("forge failed: %08x", sum(x))
	}
	return append(append([]byte(nil), prefix...), be32(x)...)
}

func TestIndexDecode(t *testing.T) {
	b := AppendIndexHeader(nil, 3, 7)
	b = AppendIndexEntry(b, IndexEntry{7, 32})
	b = AppendIndexEntry(b, IndexEntry{20, 5000})
	e, err := DecodeIndex(append(b, 1, 2, 3), 3, 7) // torn final entry ignored
	if err != nil || len(e) != 2 {
		t.Fatalf("%v %v", e, err)
	}
	if _, err := DecodeIndex(b, 2, 7); !errors.Is(err, ErrCorruption) {
		t.Fatal("version mismatch accepted")
	}
	if _, err := DecodeIndex(b, 3, 8); !errors.Is(err, ErrCorruption) {
		t.Fatal("base mismatch accepted")
	}
	bad := AppendIndexEntry(append([]byte(nil), b...), IndexEntry{19, 6000})
	if _, err := DecodeIndex(bad, 3, 7); !errors.Is(err, ErrCorruption) {
		t.Fatal("descending entries accepted")
	}
}

func TestEpochsAndRunStateDecode(t *testing.T) {
	b := EncodeEpochs([]Epoch{{1, 0}, {2, 7}})
	if e, ok := DecodeEpochs(b); !ok || len(e) != 2 || e[1] != (Epoch{2, 7}) {
		t.Fatal(e)
	}
	for _, bad := range [][]byte{nil, b[:10], b[:len(b)-1], append(append([]byte(nil), b[:len(b)-1]...), b[len(b)-1]^1)} {
		if e, ok := DecodeEpochs(bad); ok || e != nil {
			t.Fatal("bad epochs accepted")
		}
	}
	var id StorageID
	id[3] = 9
	st, ok := DecodeRunState(EncodeRunState(false, id))
	if !ok || st.CleanStop || st.ID != id {
		t.Fatal(st)
	}
	r := EncodeRunState(true, id)
	r[10] ^= 1
	if _, ok := DecodeRunState(r); ok {
		t.Fatal("bad run-state accepted")
	}
}
