package seglog

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// crashFS wraps OSFS like a machine that can lose power: it remembers, per
// file opened for writing, the content as of its last Datasync; crash puts
// every such file still present back to that content (writes not yet
// fdatasync'd are lost). Removals and renames are kept (the worst case for a
// log that deletes segments before its new data is durable). Files have no
// descriptor, so every write goes through the wrapper.
type crashFS struct {
	OSFS
	mu     sync.Mutex
	synced map[string][]byte // path → content at the last Datasync (or open)
}

func newCrashFS() *crashFS { return &crashFS{synced: map[string][]byte{}} }

func (c *crashFS) OpenFile(path string, flag int, perm os.FileMode) (File, error) {
	inner, err := c.OSFS.OpenFile(path, flag, perm)
	if err != nil || flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return inner, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.synced[path]; !ok || flag&os.O_TRUNC != 0 {
		b, rerr := os.ReadFile(path)
		if rerr != nil {
			inner.Close()
			return nil, rerr
		}
		c.synced[path] = b
	}
	return &crashFile{File: inner, fs: c, path: path}, nil
}

func (c *crashFS) Rename(a, b string) error {
	if err := c.OSFS.Rename(a, b); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.synced[b] = c.synced[a]
	delete(c.synced, a)
	return nil
}

// crash reverts every tracked file still present to its synced content.
func (c *crashFS) crash(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for path, b := range c.synced {
		if _, err := os.Stat(path); err != nil {
			continue // removed: stays removed
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type crashFile struct {
	File
	fs   *crashFS
	path string
}

func (f *crashFile) Fd() int { return -1 }

func (f *crashFile) Datasync() error {
	if err := f.File.Datasync(); err != nil {
		return err
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return err
	}
	f.fs.mu.Lock()
	f.fs.synced[f.path] = b
	f.fs.mu.Unlock()
	return nil
}

// Under fsync periodic and none, Compact deletes the old segments only once
// the live set appended at the tail is fdatasync'd: a crash right after the
// compaction completed keeps the live records.
func TestCompactIsDurableBeforeHeadDrop(t *testing.T) {
	for _, mode := range []FsyncMode{FsyncPeriodic, FsyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			fs := newCrashFS()
			d := NewDisk(nil, fs)
			l := openTest(t, d, Options{Dir: dir, SegmentBytes: 4096, FsyncMode: mode, FsyncInterval: time.Hour})
			fill(t, d, l, 100, 1)
			done := false
			if err := l.Compact([][]byte{[]byte("live-a"), []byte("live-b")}, 5, func(_, _ uint64, err error) {
				if err != nil {
					t.Errorf("compact: %v", err)
				}
				done = true
			}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, d, func() bool { return done })
			if l.EarliestOffset() != 100 {
				t.Fatalf("earliest %d after compaction, want 100", l.EarliestOffset())
			}
			fs.crash(t) // the log is never closed: power lost now
			l2 := openTest(t, NewDisk(nil, nil), Options{Dir: dir, SegmentBytes: 4096})
			defer l2.Close()
			got := fmt.Sprint(readAll(t, l2, l2.EarliestOffset()))
			if got != "[{100 5 live-a} {101 5 live-b}]" {
				t.Fatalf("after a crash: %s (earliest %d, next %d), want the live set", got, l2.EarliestOffset(), l2.NextOffset())
			}
		})
	}
}
