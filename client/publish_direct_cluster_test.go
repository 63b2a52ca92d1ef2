package client

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// metricsBody is b's /metrics text.
func metricsBody(t *testing.T, b *testBroker) string {
	t.Helper()
	resp, err := http.Get("http://" + b.info.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// metricSum sums every series of metric name (labelled or not) on b's /metrics (0 when
// absent).
func metricSum(t *testing.T, b *testBroker, name string) float64 {
	t.Helper()
	sum := 0.0
	for _, line := range strings.Split(metricsBody(t, b), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		sum += f
	}
	return sum
}

// Direct-to-owner publishing (issue 19 item 6; PublisherOptions.Direct) on three brokers of
// a static cluster: keyed records published through one broker, for a modulo stream (JSON
// acks with the shard) and a jump-hash stream (binary idempotent acks), each land once on
// the shard their key hashes to (read back through every shard's owner), and no broker
// forwarded a publish (felix_broker_forwards_total stays 0 on all three): each batch went
// to its shard's owner. Without Direct the same publishes are forwarded (the metric moves),
// so the check has teeth.
func TestDirectPublishesLandOnTheKeysShard(t *testing.T) {
	bs := startStaticCluster(t, 3)
	const shards, keys, records = 8, 40, 240
	for _, b := range bs {
		for _, s := range []StreamInfo{{Name: "mod", Shards: shards, Durable: true}, {Name: "jump", Shards: shards, Durable: true, Routing: RoutingJumpHash}} {
			if _, err := b.admin().CreateStream(testCtx(t), s); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := bs[0].dial()
	ctx := testCtx(t)
	all := make([]uint32, shards)
	for i := range all {
		all[i] = uint32(i)
	}
	for _, s := range []string{"mod", "jump"} { // every owner has opened its shards
		subscribeWhenOpen(ctx, t, c, s, SubscribeOptions{Shards: all}).Close()
	}
	for _, tc := range []struct {
		stream string
		jump   bool
		opts   PublisherOptions
	}{{"mod", false, PublisherOptions{Direct: true, Offsets: true}}, {"jump", true, PublisherOptions{Direct: true, Idempotent: true}}} {
		p, err := c.NewPublisher(tc.stream, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]uint32{}
		var pend []Pending
		for i := range records {
			key := fmt.Sprintf("entity-%d", i%keys)
			payload := fmt.Sprintf("%s/%d", key, i)
			want[payload] = uint32(routeKey(tc.jump, []byte(key), shards))
			pd, err := p.PublishKeyed(ctx, []byte(key), []byte(payload))
			if err != nil {
				t.Fatal(err)
			}
			pend = append(pend, pd)
		}
		for i, pd := range pend {
			res, err := pd.Wait(ctx)
			if err != nil || (tc.opts.Offsets && (!res.HasShard || res.Shard != want[fmt.Sprintf("entity-%d/%d", i%keys, i)])) {
				t.Fatalf("%s record %d: %+v %v", tc.stream, i, res, err)
			}
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
		readBack(t, c, tc.stream, shards, want)
	}
	for i, b := range bs {
		if n := metricSum(t, b, "felix_broker_forwards_total"); n != 0 {
			t.Fatalf("broker %d forwarded %v publishes of a Direct publisher, want 0", i, n)
		}
	}
	p, _ := c.NewPublisher("mod", PublisherOptions{})
	for i := range keys {
		if _, err := p.PublishKeyedSync(ctx, fmt.Appendf(nil, "entity-%d", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if n := metricSum(t, bs[0], "felix_broker_forwards_total"); n == 0 {
		t.Fatal("publishes without Direct through a broker leading 1 of 3 owners' shards were not forwarded: the metric shows nothing")
	}
}

// readBack subscribes to every shard of stream from the earliest record (through c,
// following the redirects to the owners) and checks every payload of want arrived once, on
// the shard want names, and nothing else.
func readBack(t *testing.T, c *Client, stream string, shards int, want map[string]uint32) {
	t.Helper()
	ctx := testCtx(t)
	all := make([]uint32, shards)
	for i := range all {
		all[i] = uint32(i)
	}
	sub := subscribeWhenOpen(ctx, t, c, stream, SubscribeOptions{Shards: all})
	defer sub.Close()
	seen := map[string]bool{}
	for range want {
		r, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("%s: after %d records: %v", stream, len(seen), err)
		}
		p := string(r.Payload)
		if shard, ok := want[p]; !ok || seen[p] || shard != r.Shard {
			t.Fatalf("%s: record %q on shard %d (want shard %d, known %v, seen before %v)", stream, p, r.Shard, shard, ok, seen[p])
		}
		seen[p] = true
	}
}
