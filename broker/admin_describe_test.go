package broker

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"felix/core"
)

// GET .../streams/{s} shows each shard's first/last offset, records and bytes (issue 23
// item 5): with 4 KiB segments, a stream limited to 8 KiB per shard shows its head
// dropped by retention (first offset > 0, bytes bounded) while its neighbour without a
// bound shows all 40 records and their bytes, and an empty stream shows no offsets.
func TestDescribeShowsShardStats(t *testing.T) {
	srv, stop := startInProcess(t, map[string]string{"FELIX_DURABLE_SEGMENT_BYTES": "4096", "FELIX_DURABLE_RETENTION_INTERVAL_SECONDS": "1"})
	defer stop()
	base := "/v1/tenants/default/namespaces/default/streams"
	size := int64(8192)
	for _, body := range []map[string]any{{"stream": "bounded", "retention": Retention{MaxSizeBytes: &size}},
		{"stream": "open"}, {"stream": "empty", "shards": 2}} {
		if code, out := adminPost(t, srv, "POST", base, body); code != http.StatusCreated {
			t.Fatalf("create %v: %d %s", body, code, out)
		}
	}
	record := make([]byte, 1000)
	for _, name := range []string{"bounded", "open"} {
		for range 40 {
			ch := make(chan error, 1)
			req := &core.PublishRequest{Stream: streamName("default", "default", name), Payloads: [][]byte{record}}
			if err := srv.engine.Publish(req, func(_ core.PublishResult, err error) { ch <- err }); err != nil {
				t.Fatal(err)
			}
			if err := <-ch; err != nil {
				t.Fatal(err)
			}
		}
	}
	describe := func(name string) []ShardStats {
		code, out := adminPost(t, srv, "GET", base+"/"+name, nil)
		var got struct {
			ShardStats []ShardStats `json:"shard_stats"`
		}
		if err := json.Unmarshal([]byte(out), &got); code != http.StatusOK || err != nil {
			t.Fatalf("describe %s: %d %s (%v)", name, code, out, err)
		}
		return got.ShardStats
	}
	waitUntil(t, 20*time.Second, "retention of 8 KiB to drop the bounded stream's head", func() bool {
		st := describe("bounded")
		return len(st) == 1 && st[0].FirstOffset != nil && *st[0].FirstOffset > 0
	})
	b := describe("bounded")[0]
	if !b.Open || b.LastOffset == nil || *b.LastOffset != 39 || b.Records != 40-*b.FirstOffset || b.Bytes <= 0 || b.Bytes > 8192+4096 {
		t.Fatalf("bounded stream after retention: %+v (first %v last %v)", b, deref(b.FirstOffset), deref(b.LastOffset))
	}
	o := describe("open")
	if len(o) != 1 || o[0].FirstOffset == nil || *o[0].FirstOffset != 0 || o[0].LastOffset == nil || *o[0].LastOffset != 39 ||
		o[0].Records != 40 || o[0].Bytes < 40*1000 {
		t.Fatalf("open stream: %+v", o)
	}
	e := describe("empty")
	if len(e) != 2 || !e[1].Open || e[1].FirstOffset != nil || e[1].LastOffset != nil || e[1].Records != 0 {
		t.Fatalf("empty stream: %+v", e)
	}
}

func deref(p *uint64) any {
	if p == nil {
		return nil
	}
	return *p
}
