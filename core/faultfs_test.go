package core

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"felix/internal/vfs/vfstest"
)

var errInjected = errors.New("injected EIO")

// TestInjectedDiskFaultsFailPublishesAndKeepAckedRecords runs durable
// publishes over a file system that fails on demand: a failed fdatasync or
// write fails the publishes it covers with ErrStorageFailed (wrapping the
// cause), the shard refuses publishes while failed, and after reopening every acknowledged
// record is there once, in order. Once the disk heals the shard retries and
// acknowledges again (issue 23 item 4).
func TestInjectedDiskFaultsFailPublishesAndKeepAckedRecords(t *testing.T) {
	for _, fault := range []string{"fdatasync", "write"} {
		t.Run(fault, func(t *testing.T) {
			dir := t.TempDir()
			fs := &vfstest.FaultFS{} // the shared fault FS (was the private faultFS of this file)
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
				fs.Fail(vfstest.OpDatasync, errInjected)
			} else {
				fs.Fail(vfstest.OpWrite, errInjected)
			}
			_, err := publishSync(t, e, &PublishRequest{Stream: testStream, Payloads: payloads("lost", 1)})
			if !errors.Is(err, ErrStorageFailed) || !errors.Is(err, errInjected) {
				t.Fatalf("publish over a failing %s: %v", fault, err)
			}
			fs.Heal()
			// The shard retries by itself (storage_retry.go) and acknowledges again.
			waitPublish(t, e, 0, "after-0")
			acked = append(acked, "after-0")
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
