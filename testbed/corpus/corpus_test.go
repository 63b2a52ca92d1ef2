package corpus

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, tc := range []struct{ key, content string }{{"", ""}, {"a/b", ""}, {"/usr/share/doc/x", "hello\x00world"}} {
		p := AppendRecord(nil, tc.key, []byte(tc.content))
		k, c, err := DecodeRecord(p)
		if err != nil || string(k) != tc.key || string(c) != tc.content {
			t.Fatalf("round trip %q/%q: %q %q %v", tc.key, tc.content, k, c, err)
		}
	}
	if _, _, err := DecodeRecord([]byte("FXE1\x00\x09abc")); !errors.Is(err, ErrRecordLength) {
		t.Fatalf("short key: %v", err)
	}
	if _, _, err := DecodeRecord([]byte("nope!!")); !errors.Is(err, ErrNotRecord) {
		t.Fatalf("bad magic: %v", err)
	}
}

// Load samples evenly, leaves out what exceeds the payload limit, and ReadRecord refuses a
// file that changed since it was listed.
func TestLoadSamplesAndReadRecordNoticesAChange(t *testing.T) {
	dir := t.TempDir()
	for i, size := range []int{10, 20, 30, 4000} {
		if err := os.WriteFile(filepath.Join(dir, string(rune('a'+i))), bytes.Repeat([]byte{'x'}, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Load([]string{dir}, 0, 1000)
	if err != nil || len(c.Files) != 3 || c.Skipped != 1 || c.Scanned != 4 || c.Bytes != 60 {
		t.Fatalf("load: %+v %v", c, err)
	}
	if s, _ := Load([]string{dir}, 2, 1000); len(s.Files) != 2 {
		t.Fatalf("a sample of 2 has %d files", len(s.Files))
	}
	if _, err := Load([]string{t.TempDir()}, 0, 1000); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty root: %v", err)
	}
	p, err := ReadRecord(&c.Files[0])
	if k, body, _ := DecodeRecord(p); err != nil || string(k) != c.Files[0].Path || len(body) != 10 {
		t.Fatalf("read record: %q %d %v", k, len(body), err)
	}
	os.WriteFile(c.Files[0].Path, []byte("changed"), 0o644)
	if _, err := ReadRecord(&c.Files[0]); !errors.Is(err, ErrChanged) {
		t.Fatalf("changed file: %v", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(AppendRecord(nil, "go/src/fmt/print.go", []byte("package fmt")))
	f.Add(AppendRecord(nil, "", nil))
	f.Add([]byte("FXE1\xff\xff"))
	f.Fuzz(func(t *testing.T, p []byte) {
		k, c, err := DecodeRecord(p)
		if err != nil {
			return
		}
		if got := AppendRecord(nil, string(k), c); !bytes.Equal(got, p) {
			t.Fatalf("re-encoding differs: %x vs %x", got, p)
		}
	})
}
