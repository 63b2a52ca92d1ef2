package client

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"felix/testbed/supervisor"
)

// faultRecord is the payload of record i of the storage-fault tests: 200 bytes.
func faultRecord(i int) []byte { return []byte(fmt.Sprintf("%03d", i) + strings.Repeat("p", 197)) }

// streamSegment is the path of the first segment of stream's shard 0 record log under dataDir.
func streamSegment(t *testing.T, dataDir, stream string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dataDir, "streams", "*_"+stream+"_0-*", "00000000000000000000.log"))
	if err != nil || len(m) != 1 {
		t.Fatalf("segment of %s: %v %v", stream, m, err)
	}
	return m[0]
}

// damagedSealedBroker runs a broker (64 KiB segments) with stream "damaged" of 600
// records of 200 bytes, stops it, flips a payload byte of offset 4 in its sealed segment 0
// and starts it again on the same data dir.
func damagedSealedBroker(t *testing.T) *testBroker {
	t.Helper()
	seg := []string{"FELIX_DURABLE_SEGMENT_BYTES=65536", "FELIX_DURABLE_FSYNC_MODE=on_commit"}
	b := startBroker(t, "", seg...)
	b.createStream("damaged", true)
	c := b.dial()
	p, err := c.NewPublisher("damaged", PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 600 {
		if _, err := p.PublishSync(testCtx(t), faultRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	b.stop()
	f, err := os.OpenFile(streamSegment(t, b.dataDir, "damaged"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, 32+4*232+32+100); err != nil { // offset 4's payload (32-byte segment and record headers)
		t.Fatal(err)
	}
	f.Close()
	return startBroker(t, b.dataDir, seg...)
}

// A flipped byte in a sealed segment (issue 23 item 1), through a real broker: a
// subscription from earliest delivers offsets 0..3, then Next ends with ErrStorageFailed
// naming the stream, shard, segment and byte (not the server's path) and the SDK does not
// subscribe again; a subscription from offset 5 reads every later record; the broker
// logged the damage at ERROR and exports felix_stream_damaged.
func TestDamagedSealedSegmentEndsSubscriptionTyped(t *testing.T) {
	b := damagedSealedBroker(t)
	c := b.dial()
	sub, err := c.Subscribe(testCtx(t), "damaged", Earliest, SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []uint64
	for {
		r, err := sub.Next(testCtx(t))
		if err != nil {
			if !errors.Is(err, ErrStorageFailed) || !strings.Contains(err.Error(), "damaged shard 0") ||
				!strings.Contains(err.Error(), "segment 00000000000000000000.log at byte 960") || strings.Contains(err.Error(), b.dataDir) {
				t.Fatalf("after %v: %v, want storage_failed naming stream, shard, segment and byte", got, err)
			}
			break
		}
		got = append(got, r.Offset)
	}
	if fmt.Sprint(got) != "[0 1 2 3]" {
		t.Fatalf("delivered %v before the damage, want [0 1 2 3]", got)
	}
	if n := metricValue(t, b, "felix_broker_subscriptions_total"); n != 1 {
		t.Fatalf("%v subscriptions, want 1 (no re-subscribe after storage_failed)", n)
	}
	above, err := c.Subscribe(testCtx(t), "damaged", Offset(5), SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer above.Close()
	for want := uint64(5); want < 600; want++ {
		r, err := above.Next(testCtx(t))
		if err != nil || r.Offset != want || string(r.Payload) != string(faultRecord(int(want))) {
			t.Fatalf("read above the damage at %d: %v %v", want, r.Offset, err)
		}
	}
	if !strings.Contains(b.logs.String(), "level=ERROR") || !strings.Contains(b.logs.String(), "log damaged") {
		t.Fatalf("no ERROR line for the damage:\n%s", b.logs.String())
	}
	wantDescribedDamage(t, b, "damaged", ShardDamage{Segment: "00000000000000000000.log", AtByte: 960, Kind: "RecordChecksum", Offset: 4, Readable: true})
	resp, err := http.Get("http://" + b.info.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !regexp.MustCompile(`(?m)^felix_stream_damaged\{[^}]*stream="damaged",shard="0"\} 1$`).Match(body) {
		t.Fatalf("no felix_stream_damaged 1 for the shard:\n%s", body)
	}
}

// wantDescribedDamage checks the admin API's description of stream lists want (shard 0).
func wantDescribedDamage(t *testing.T, b *testBroker, stream string, want ShardDamage) {
	t.Helper()
	info, err := b.admin().DescribeStream(testCtx(t), stream)
	if err != nil || len(info.Damaged) != 1 || info.Damaged[0] != want {
		t.Fatalf("describe %s: %+v %v, want damaged %+v", stream, info.Damaged, err, want)
	}
}

// wantValues checks every key of want has its value in cache.
func wantValues(t *testing.T, c *Client, cache string, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got, found, err := c.Get(testCtx(t), cache, k); err != nil || !found || string(got) != v {
			t.Fatalf("get %s: %q %v %v, want %q", k, got, found, err, v)
		}
	}
}

// untilStored retries op while it answers storage_failed (the broker's retry brings the
// shard back), for at most 30 s.
func untilStored(t *testing.T, what string, op func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for err := op(); err != nil; err = op() {
		if !errors.Is(err, ErrStorageFailed) || time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fillDisk writes a file into dir until the file system answers ENOSPC and returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for i := 0; ; i++ {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return p
		}
		if i > 1<<16 {
			t.Fatal("the tmpfs never filled")
		}
	}
}

// A full disk under a real broker on a small tmpfs (issue 23 item 4): once it fills, a
// publish and a cache put are answered storage_failed naming the stream or cache and the
// errno, not the server's path; a get of an old key still answers; once the filler is
// removed, publishes and puts are acknowledged again with no restart, and every record
// acknowledged before and after is read back once, in order.
func TestFullDiskThenFreedResumesWithoutRestart(t *testing.T) {
	mnt := supervisor.MountTmpfsForTest(t, 8<<20)
	b := startBroker(t, filepath.Join(mnt, "data"), "FELIX_DURABLE_SEGMENT_BYTES=65536", "FELIX_DURABLE_FSYNC_MODE=on_commit")
	b.createStream("full", true)
	b.createCache("kv")
	c := b.dial()
	p, err := c.NewPublisher("full", PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var acked []string
	publish := func(s string) error {
		_, err := p.PublishSync(testCtx(t), []byte(s))
		if err == nil {
			acked = append(acked, s)
		}
		return err
	}
	for i := range 10 {
		if err := publish(fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Put(testCtx(t), "kv", "old", []byte("v1"), 0); err != nil {
		t.Fatal(err)
	}
	filler := fillDisk(t, mnt)
	pad := strings.Repeat("x", 1000)
	var perr error
	for i := 0; i < 300 && perr == nil; i++ { // past the 64 KiB segment: the roll needs new blocks
		perr = publish(fmt.Sprintf("full-%d-%s", i, pad))
	}
	if !errors.Is(perr, ErrStorageFailed) || !strings.Contains(perr.Error(), "no space left on device") || strings.Contains(perr.Error(), mnt) {
		t.Fatalf("publish on a full disk: %v", perr)
	}
	var cerr error
	for i := 0; i < 300 && cerr == nil; i++ {
		cerr = c.Put(testCtx(t), "kv", fmt.Sprintf("k%d", i), []byte(pad), 0)
	}
	if !errors.Is(cerr, ErrStorageFailed) || strings.Contains(cerr.Error(), mnt) {
		t.Fatalf("cache put on a full disk: %v", cerr)
	}
	wantValues(t, c, "kv", map[string]string{"old": "v1"}) // from memory while writes fail
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	untilStored(t, "publish after freeing the disk", func() error { return publish("after-0") })
	untilStored(t, "put after freeing the disk", func() error { return c.Put(testCtx(t), "kv", "after", []byte("v2"), 0) })
	wantValues(t, c, "kv", map[string]string{"old": "v1", "after": "v2"})
	sub, err := c.Subscribe(testCtx(t), "full", Earliest, SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for i, want := range acked {
		r, err := sub.Next(testCtx(t))
		if err != nil || string(r.Payload) != want {
			t.Fatalf("record %d: %.20q %v, want %.20q", i, r.Payload, err, want)
		}
	}
	if !strings.Contains(b.logs.String(), "log write failed") || !strings.Contains(b.logs.String(), mnt) {
		t.Fatalf("no ERROR line naming the path:\n%s", b.logs.String())
	}
}
