package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A subscriber that stops reading while a fast publisher sends 100 000 records (the
// broker's queue holds 4 frames, the SDK's 2 batches, so QUIC flow control stalls the
// broker's writer and the engine's queue fills) on a durable stream then receives every
// record, in order, with no gap, and the broker counts a catch-up episode and no drop
// (issue 23 item 6: it read them from the log); on an in-memory stream the same run
// counts drops (no offsets on the wire there: the SDK cannot show them as gaps).
func TestSlowDurableSubscriberLosesNothing(t *testing.T) {
	b := startBroker(t, "", "FELIX_SUBSCRIBER_QUEUE_CAPACITY=4")
	b.createStream("durable", true)
	b.createStream("memory", false)
	c := b.dial(WithSubscriptionQueue(2))
	const n = 100_000
	payload := strings.Repeat("x", 190)
	for _, name := range []string{"durable", "memory"} {
		// 100 000 records under -race on a loaded machine: a longer bound than testCtx.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		sub, err := c.Subscribe(ctx, name, Latest, SubscribeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.NewPublisher(name, PublisherOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if _, err := p.Publish(ctx, []byte(fmt.Sprintf("%06d%s", i, payload))); err != nil {
				t.Fatalf("%s: publish %d: %v", name, i, err)
			}
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if name == "memory" { // no offsets on the wire: the engine counts the loss
			if drops := metric(t, b, "felix_subscribe_dropped_total", name); drops == 0 {
				t.Fatal("memory: no drop counted: the subscriber never fell behind, the test proves nothing")
			}
			sub.Close()
			p.Close(ctx)
			continue
		}
		got, gaps := 0, uint64(0)
		for uint64(got)+gaps < n {
			r, err := sub.Next(ctx)
			if err != nil {
				t.Fatalf("%s: Next after %d records, %d in gaps: %v (catch-up episodes %d, records read from the log %d)", name, got, gaps, err,
					metric(t, b, "felix_subscribe_catchup_total", name), metric(t, b, "felix_subscribe_catchup_records_total", name))
			}
			gaps += r.Gap
			if want := fmt.Sprintf("%06d", uint64(got)+gaps); r.Gap != 0 || string(r.Payload[:6]) != want {
				t.Fatalf("durable: record %q (gap %d), want %s with no gap", r.Payload[:6], r.Gap, want)
			}
			got++
		}
		sub.Close()
		p.Close(ctx)
		episodes, drops := metric(t, b, "felix_subscribe_catchup_total", name), metric(t, b, "felix_subscribe_dropped_total", name)
		t.Logf("%s: %d records delivered, %d catch-up episodes, %d dropped", name, got, episodes, drops)
		if episodes == 0 || drops != 0 {
			t.Fatalf("durable: %d catch-up episodes, %d dropped (want at least one episode, nothing dropped)", episodes, drops)
		}
	}
}

// metric reads series{stream name, shard 0} from the broker's /metrics (0 when absent).
func metric(t *testing.T, b *testBroker, series, name string) int {
	t.Helper()
	resp, err := http.Get("http://" + b.info.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	prefix := series + `{tenant="default",namespace="default",stream="` + name + `",shard="0"} `
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}
