package core

import (
	"bytes"
	"strings"
	"testing"
)

func TestMetricsPerCoreAndShard(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, QueueCapacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("a", 2)})
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("b", 3)}) // read from the log (catchup.go)
	h.step(2)
	var buf bytes.Buffer
	h.e.Metrics().WritePrometheus(&buf)
	out := buf.String()
	shard := `{tenant="t1",namespace="default",stream="orders",shard="0"}`
	for _, want := range []string{
		`felix_core_inbox_depth{core="0"} 0`,
		`felix_core_drain_batch_size_count{core="0"}`,
		`felix_subscribe_dropped_total` + shard + ` 0`,
		`felix_subscribe_catchup_total` + shard + ` 1`,
		`felix_subscribe_catchup_records_total` + shard + ` 0`,
		`felix_stream_subscriber_lag_records` + shard + ` 5`,
		`felix_stream_commit_seconds_count` + shard + ` 2`,
		`felix_stream_append_wait_seconds_count` + shard + ` 2`,
		`felix_stream_publish_batch_records_count` + shard + ` 2`,
		`felix_stream_failed` + shard + ` 0`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
	if err := h.e.DeleteStream(testStream); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	h.e.Metrics().WritePrometheus(&buf)
	if strings.Contains(buf.String(), shard) {
		t.Fatal("a deleted shard's metrics remain")
	}
}
