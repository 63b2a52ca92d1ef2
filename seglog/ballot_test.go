package seglog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The ballot file's bytes are the spec's layout, round-trip, and every damaged form
// decodes as the empty ballot.
func TestBallotEncoding(t *testing.T) {
	b, err := EncodeBallot(Ballot{Generation: 7, Leader: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{'F', 'L', 'S', 'B', 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 2, 'n', '2'}
	want = binary.BigEndian.AppendUint32(want, crcIEEE(want))
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded %x, want %x", b, want)
	}
	if got, ok := DecodeBallot(b); !ok || got != (Ballot{7, "n2"}) {
		t.Fatalf("decoded %+v %v", got, ok)
	}
	bad := map[string][]byte{"short": b[:len(b)-1], "empty": nil, "long": append(append([]byte{}, b...), 0)}
	for i := range b {
		c := append([]byte{}, b...)
		c[i] ^= 0x40
		bad["flip "+string(rune('a'+i))] = c
	}
	for name, c := range bad {
		if got, ok := DecodeBallot(c); ok || got != (Ballot{}) {
			t.Fatalf("%s: decoded %+v %v", name, got, ok)
		}
	}
	if _, err := EncodeBallot(Ballot{Leader: strings.Repeat("x", 1<<16)}); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("a 64 KiB leader id: %v", err)
	}
}

// WriteBallot persists across a reopen and survives Reset; an absent or corrupt file
// reads as the empty ballot without failing the open.
func TestBallotFile(t *testing.T) {
	dir := t.TempDir()
	d := NewDisk(newRing(t), nil)
	o := Options{Dir: dir, FsyncMode: FsyncOnCommit, SegmentBytes: 4096}
	l := openTest(t, d, o)
	if got := l.ReadBallot(); got != (Ballot{}) {
		t.Fatalf("absent ballot read %+v", got)
	}
	fill(t, d, l, 3, 1)
	if err := l.WriteBallot(Ballot{Generation: 3, Leader: "n1.felix.test"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Reset(10); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := l.WriteBallot(Ballot{Generation: 4}); !errors.Is(err, ErrClosed) {
		t.Fatalf("write on a closed log: %v", err)
	}
	l = openTest(t, d, o)
	if got := l.ReadBallot(); got != (Ballot{3, "n1.felix.test"}) {
		t.Fatalf("reopened ballot %+v", got)
	}
	l.Close()
	p := filepath.Join(dir, BallotFileName)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, d, o)
	defer l.Close()
	if got := l.ReadBallot(); got != (Ballot{}) {
		t.Fatalf("corrupt ballot read %+v", got)
	}
	if l.NextOffset() != 10 {
		t.Fatalf("reopened at %d, want 10", l.NextOffset())
	}
}
