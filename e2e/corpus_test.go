package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// file is one corpus entry: its path (the record key) and what the checks compare.
type file struct {
	path string
	size int64
	sum  [32]byte
}

// corpus lists every regular file under roots (sorted by path), then keeps an evenly
// spread sample of at most limit files (0 = all). Files larger than maxPayload are left
// out and counted in skipped; unreadable ones too.
type corpus struct {
	files      []file
	scanned    int
	skipped    int // above maxPayload
	unreadable int
	bytes      int64
}

func loadCorpus(t *testing.T, roots []string, limit int, maxPayload int64) *corpus {
	t.Helper()
	var paths []string
	for _, root := range roots {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				paths = append(paths, p)
			}
			return nil
		})
	}
	sort.Strings(paths)
	c := &corpus{scanned: len(paths)}
	if limit > 0 && len(paths) > limit {
		sample := make([]string, 0, limit)
		for i := 0; i < limit; i++ {
			sample = append(sample, paths[i*len(paths)/limit])
		}
		paths = sample
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			c.unreadable++
			continue
		}
		if fi.Size()+int64(recordOverhead+len(p)) > maxPayload {
			c.skipped++
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			c.unreadable++
			continue
		}
		c.files = append(c.files, file{path: p, size: int64(len(data)), sum: sha256.Sum256(data)})
		c.bytes += int64(len(data))
	}
	if len(c.files) == 0 {
		t.Fatalf("no corpus files under %v", roots)
	}
	return c
}

// corpusRoots are $(go env GOROOT)/src and /usr/share/doc (the latter when present).
func corpusRoots(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	roots := []string{filepath.Join(strings.TrimSpace(string(out)), "src")}
	if _, err := os.Stat("/usr/share/doc"); err == nil {
		roots = append(roots, "/usr/share/doc")
	}
	return roots
}

// Record layout (this test's own, big-endian): "FXE1", u16 key length, key (the file's
// path), then the file's bytes. The broker routes records round-robin (the wire has no key
// field), so the key travels inside the payload.
const (
	recordMagic    = "FXE1"
	recordOverhead = 4 + 2
)

// Record decoding errors.
var (
	errNotRecord    = errors.New("e2e: payload is not an FXE1 record")
	errRecordLength = errors.New("e2e: record key length exceeds the payload")
)

// appendRecord encodes key and content as one record payload.
func appendRecord(dst []byte, key string, content []byte) []byte {
	dst = append(dst, recordMagic...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(key)))
	dst = append(dst, key...)
	return append(dst, content...)
}

// decodeRecord splits a payload into key and content (sub-slices of p).
func decodeRecord(p []byte) (key, content []byte, err error) {
	if len(p) < recordOverhead || !bytes.Equal(p[:4], []byte(recordMagic)) {
		return nil, nil, errNotRecord
	}
	n := int(binary.BigEndian.Uint16(p[4:6]))
	if n > len(p)-recordOverhead {
		return nil, nil, fmt.Errorf("%w: key of %d bytes, %d left", errRecordLength, n, len(p)-recordOverhead)
	}
	return p[6 : 6+n], p[6+n:], nil
}

// readRecord re-reads f and encodes its record; the content is checked against the
// SHA-256 taken when the corpus was listed (a file changing under the test is an error).
func readRecord(f *file) ([]byte, error) {
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, err
	}
	if sha256.Sum256(data) != f.sum {
		return nil, fmt.Errorf("%s changed while the test ran", f.path)
	}
	return appendRecord(make([]byte, 0, recordOverhead+len(f.path)+len(data)), f.path, data), nil
}

func TestRecordRoundTrip(t *testing.T) {
	for _, tc := range []struct{ key, content string }{{"", ""}, {"a/b", ""}, {"/usr/share/doc/x", "hello\x00world"}} {
		p := appendRecord(nil, tc.key, []byte(tc.content))
		k, c, err := decodeRecord(p)
		if err != nil || string(k) != tc.key || string(c) != tc.content {
			t.Fatalf("round trip %q/%q: %q %q %v", tc.key, tc.content, k, c, err)
		}
	}
	if _, _, err := decodeRecord([]byte("FXE1\x00\x09abc")); !errors.Is(err, errRecordLength) {
		t.Fatalf("short key: %v", err)
	}
	if _, _, err := decodeRecord([]byte("nope!!")); !errors.Is(err, errNotRecord) {
		t.Fatalf("bad magic: %v", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendRecord(nil, "go/src/fmt/print.go", []byte("package fmt")))
	f.Add(appendRecord(nil, "", nil))
	f.Add([]byte("FXE1\xff\xff"))
	f.Fuzz(func(t *testing.T, p []byte) {
		k, c, err := decodeRecord(p)
		if err != nil {
			return
		}
		if got := appendRecord(nil, string(k), c); !bytes.Equal(got, p) {
			t.Fatalf("re-encoding differs: %x vs %x", got, p)
		}
	})
}
