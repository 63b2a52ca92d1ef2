package transport

import (
	"bytes"
	"strings"
	"testing"

	"felix/proto"

	"github.com/VictoriaMetrics/metrics"
)

// The dispatcher answers each kind with its handler and an unregistered kind with
// UnsupportedKind on the same stream, which goes on; the pool's per-peer series count it all.
func TestDispatcherRoutesByKindAndPoolMetrics(t *testing.T) {
	d := NewDispatcher()
	d.Register(proto.KindAuthorizedForwardPublish, okHandler)
	d.Register(proto.KindForwardCacheOp, okHandler)
	d.Register(proto.KindForwardCacheOp, nil)
	if k := d.Kinds(); len(k) != 1 || k[0] != proto.KindAuthorizedForwardPublish {
		t.Fatalf("registered kinds %v (%s)", k, d)
	}
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, d.Handle)
	set := metrics.NewSet()
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{StreamsPerConn: 1, Metrics: set})
	ctx := testCtx(t)
	to := Peer{NodeID: "node-b", Addr: l.Addr().String()}
	plain := &proto.ForwardPublish{Shard: proto.ShardRef{Tenant: []byte("t"), Namespace: []byte("n"), Name: []byte("s")}}
	ans, err := p.Request(ctx, to, plain)
	if u, ok := ans.(*proto.UnsupportedKind); err != nil || !ok || u.RefusedKind != proto.KindForwardPublish {
		t.Fatalf("unregistered kind: %#v %v, want UnsupportedKind", ans, err)
	}
	ans, err = p.Request(ctx, to, publish(11))
	if ok, isOk := ans.(*proto.ForwardPublishOk); err != nil || !isOk || ok.FirstOffset != 11 {
		t.Fatalf("registered kind after the refusal: %#v %v", ans, err)
	}
	var out bytes.Buffer
	set.WritePrometheus(&out)
	for _, want := range []string{
		`felix_internal_peer_connections_total{peer="node-b"} 1`,
		`felix_internal_peer_reconnects_total{peer="node-b"} 0`,
		`felix_internal_peer_inflight{peer="node-b"} 0`,
		`felix_internal_peer_shed_total{peer="node-b"} 0`,
		`felix_internal_peer_timeouts_total{peer="node-b"} 0`,
		`felix_internal_peer_request_duration_seconds_count{peer="node-b"} 2`,
		`felix_internal_peer_sent_bytes_total{peer="node-b"}`,
		`felix_internal_peer_received_bytes_total{peer="node-b"}`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), `sent_bytes_total{peer="node-b"} 0`) {
		t.Error("no bytes counted as sent")
	}
}
