package core

import (
	"context"
	"testing"
	"time"

	felixclock "felix/clock"
	"felix/seglog"
)

// TestConfigClockStampsRecords: Config.Clock is the engine's time (the test clock hook of
// felix-broker sets it): a record published on an engine whose clock runs two days ahead
// carries that clock's timestamp on disk.
func TestConfigClockStampsRecords(t *testing.T) {
	dir := t.TempDir()
	e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true,
		Clock: felixclock.Skewed(48*time.Hour, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateStream(StreamSpec{Name: testStream, Shards: 1, Durable: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Payloads: payloads("x", 1)}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := seglog.NewDisk(nil, nil)
	l, err := d.Open(seglog.Options{Dir: seglog.ShardDir(dir, seglog.ShardKey{Kind: seglog.ShardStream,
		Tenant: testStream.Tenant, Namespace: testStream.Namespace, Name: testStream.Stream})})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var ts int64
	if err := l.Read(0, 1<<20, func(_ uint64, tsMicros int64, _ []byte) bool { ts = tsMicros; return false }); err != nil {
		t.Fatal(err)
	}
	if ahead := time.Until(time.UnixMicro(ts)); ahead < 47*time.Hour || ahead > 49*time.Hour {
		t.Fatalf("record stamped %v ahead of the real clock, want about 48h", ahead)
	}
}
