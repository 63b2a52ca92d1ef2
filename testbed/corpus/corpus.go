// Package corpus is the real-input corpus of the crash tests: every regular file under
// $(go env GOROOT)/src and /usr/share/doc (or an evenly spread sample), each with its size
// and SHA-256, and the record layout that carries one file per record (docs/soak.md).
//
// Record layout (big-endian): "FXE1", u16 key length, key (the file's path), the file's
// bytes. The key also travels inside the payload, so a reader can check the record against
// the file whatever the stream's routing did.
package corpus

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
)

// File is one corpus entry: its path (the record key), size in bytes and SHA-256.
type File struct {
	Path string
	Size int64
	Sum  [32]byte
}

// Corpus is the listed files (sorted by path) and what the listing left out.
type Corpus struct {
	Files      []File
	Scanned    int   // regular files found under the roots
	Skipped    int   // larger than the payload limit
	Unreadable int   // could not be read
	Bytes      int64 // total size of Files
}

// ErrEmpty is Load's error when no file is left.
var ErrEmpty = errors.New("corpus: no file under the roots")

// Load lists every regular file under roots, keeps an evenly spread sample of at most limit
// (0 = all), and leaves out files whose record would exceed maxPayload bytes. Errors:
// ErrEmpty.
func Load(roots []string, limit int, maxPayload int64) (*Corpus, error) {
	var paths []string
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				paths = append(paths, p)
			}
			return nil
		})
	}
	sort.Strings(paths)
	c := &Corpus{Scanned: len(paths)}
	if limit > 0 && len(paths) > limit {
		sample := make([]string, 0, limit)
		for i := range limit {
			sample = append(sample, paths[i*len(paths)/limit])
		}
		paths = sample
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			c.Unreadable++
			continue
		}
		if fi.Size()+int64(RecordOverhead+len(p)) > maxPayload {
			c.Skipped++
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			c.Unreadable++
			continue
		}
		c.Files = append(c.Files, File{Path: p, Size: int64(len(data)), Sum: sha256.Sum256(data)})
		c.Bytes += int64(len(data))
	}
	if len(c.Files) == 0 {
		return nil, fmt.Errorf("%w %v", ErrEmpty, roots)
	}
	return c, nil
}

// Roots are $(go env GOROOT)/src and /usr/share/doc (the latter when present).
func Roots() ([]string, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("corpus: go env GOROOT: %w", err)
	}
	roots := []string{filepath.Join(strings.TrimSpace(string(out)), "src")}
	if _, err := os.Stat("/usr/share/doc"); err == nil {
		roots = append(roots, "/usr/share/doc")
	}
	return roots, nil
}

// Record layout constants: the magic and the bytes a record adds to key and content.
const (
	RecordMagic    = "FXE1"
	RecordOverhead = 4 + 2
)

// Record decoding errors.
var (
	ErrNotRecord    = errors.New("corpus: payload is not an FXE1 record")
	ErrRecordLength = errors.New("corpus: record key length exceeds the payload")
	ErrChanged      = errors.New("corpus: file changed since it was listed")
)

// AppendRecord appends key and content encoded as one record payload to dst.
func AppendRecord(dst []byte, key string, content []byte) []byte {
	dst = append(dst, RecordMagic...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(key)))
	dst = append(dst, key...)
	return append(dst, content...)
}

// DecodeRecord splits a payload into key and content (sub-slices of p). Errors:
// ErrNotRecord, ErrRecordLength.
func DecodeRecord(p []byte) (key, content []byte, err error) {
	if len(p) < RecordOverhead || !bytes.Equal(p[:4], []byte(RecordMagic)) {
		return nil, nil, ErrNotRecord
	}
	n := int(binary.BigEndian.Uint16(p[4:6]))
	if n > len(p)-RecordOverhead {
		return nil, nil, fmt.Errorf("%w: key of %d bytes, %d left", ErrRecordLength, n, len(p)-RecordOverhead)
	}
	return p[6 : 6+n], p[6+n:], nil
}

// ReadRecord re-reads f and encodes its record. Errors: the read's, ErrChanged when the
// content no longer has the SHA-256 taken at listing.
func ReadRecord(f *File) ([]byte, error) {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return nil, err
	}
	if sha256.Sum256(data) != f.Sum {
		return nil, fmt.Errorf("%w: %s", ErrChanged, f.Path)
	}
	return AppendRecord(make([]byte, 0, RecordOverhead+len(f.Path)+len(data)), f.Path, data), nil
}
