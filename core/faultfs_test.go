package core

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"felix/seglog"
)

// faultFS wraps the OS file system; its files give the ring no descriptor,
// so seglog drives every write and fdatasync through them, and an armed
// fault fails the next fdatasync or write.
type faultFS struct {
	seglog.OSFS
	failSync  atomic.Bool
	failWrite atomic.Bool
}

var errInjected = errors.New("injected EIO")

type faultFile struct {
	seglog.File
	fs *faultFS
}

func (f *faultFS) OpenFile(path string, flag int, perm os.FileMode) (seglog.File, error) {
	file, err := f.OSFS.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *faultFile) Fd() int { return -1 }

func (f *faultFile) Datasync() error {
	if f.fs.failSync.Load() {
		return errInjected
	}
	return f.File.Datasync()
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.failWrite.Load() {
		return 0, errInjected
	}
	return f.File.WriteAt(p, off)
}

// TestInjectedDiskFaultsFailPublishesAndKeepAckedRecords runs durable
// publishes over a file system that fails on demand: a failed fdatasync or
// write fails the publishes it covers with ErrStorageFailed (wrapping the
// cause), the shard stays failed, and after reopening every acknowledged
// record is there once, in order.
func TestInjectedDiskFaultsFailPublishesAndKeepAckedRecords(t *testing.T) {
	for _, fault := range []string{"fdatasync", "write"} {
		t.Run(fault, func(t *testing.T) {
			dir := t.TempDir()
			fs := &faultFS{}
			open := func() *Engine {
				e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true, fs: fs})
				if err != nil {
					t.Fatal(err)
				}
				if err := e.CreateStream(StreamSpec{Name: testStream, Shards: 1, Durable: true}); err != nil {
					t.Fatal(err)
				}
				return e
			}
			e := open()
			var acked []string
			for i := range 5 {
				req := &PublishRequest{Stream: testStream, Payloads: payloads(fmt.Sprint(i), 2)}
				if _, err := publishSync(t, e, req); err != nil {
					t.Fatal(err)
				}
				acked = append(acked, fmt.Sprintf("%d-0", i), fmt.Sprintf("%d-1", i))
			}
			if fault == "fdatasync" {
				fs.failSync.Store(true)
			} else {
				fs.failWrite.Store(true)
			}
			_, err := publishSync(t, e, &PublishRequest{Stream: testStream, Payloads: payloads("lost", 1)})
			if !errors.Is(err, ErrStorageFailed) || !errors.Is(err, errInjected) {
				t.Fatalf("publish over a failing %s: %v", fault, err)
			}
			fs.failSync.Store(false)
			fs.failWrite.Store(false)
			if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Payloads: payloads("after", 1)}); !errors.Is(err, ErrStorageFailed) {
				t.Fatalf("publish after the failure: %v", err)
			}
			_ = e.Close(context.Background())
			e = open()
			defer e.Close(context.Background())
			got := readShard(t, e, testStream, 0, true)
			if len(got) < len(acked) || fmt.Sprint(got[:len(acked)]) != fmt.Sprint(acked) {
				t.Fatalf("after reopening: %v, acknowledged %v", got, acked)
			}
			if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Payloads: payloads("again", 1)}); err != nil {
				t.Fatalf("publish after reopening: %v", err)
			}
		})
	}
}
