package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"felix/netq"
	"felix/proto"

	"github.com/VictoriaMetrics/metrics"
	"github.com/quic-go/quic-go"
)

// metricValue returns the text line of series in set ("" when absent).
func metricValue(set *metrics.Set, series string) string {
	var out bytes.Buffer
	set.WritePrometheus(&out)
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, series+" ") {
			return strings.TrimPrefix(line, series+" ")
		}
	}
	return ""
}

// The listener counts what it accepts, refuses, serves and refuses to decode, by reason and
// by kind, in Options.Metrics.
func TestListenerMetrics(t *testing.T) {
	set := metrics.NewSet()
	d := NewDispatcher()
	d.Register(proto.KindAuthorizedForwardPublish, okHandler)
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{Metrics: set}, d.Handle)
	ctx := testCtx(t)
	qc, s := rawPeer(t, ctx, l)
	writeMsg(t, s, publish(1))
	if m := readMsg(t, s); m.Kind() != proto.KindForwardPublishOk {
		t.Fatalf("registered kind answered %v", m.Kind())
	}
	writeMsg(t, s, &proto.ForwardPublish{Shard: proto.ShardRef{Tenant: []byte("t"), Namespace: []byte("n"), Name: []byte("s")}})
	if m := readMsg(t, s); m.Kind() != proto.KindUnsupportedKind {
		t.Fatalf("unregistered kind answered %v", m.Kind())
	}
	writeMsg(t, s, &proto.Unknown{RawKind: 999, Body: make([]byte, 8+5)})
	if m := readMsg(t, s); m.Kind() != proto.KindUnsupportedKind {
		t.Fatalf("unknown kind answered %v", m.Kind())
	}
	s2, err := qc.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	body := binary.BigEndian.AppendUint64(nil, 42)
	if _, err := s2.Write(append(proto.AppendInternalHeader(nil, proto.KindAuthorizedForwardPublish, uint32(len(body)+3)), append(body, 0, 9, 'x')...)); err != nil {
		t.Fatal(err)
	}
	if m := readMsg(t, s2); m.Kind() != proto.KindForwardPublishError {
		t.Fatalf("malformed body answered %v", m.Kind())
	}
	refusedConnections(t, ctx, l)
	want := map[string]string{
		"felix_internal_listener_connections_accepted_total":                       "1",
		"felix_internal_listener_connections_active":                               "1",
		`felix_internal_listener_connections_refused_total{reason="alpn"}`:         "1",
		`felix_internal_listener_connections_refused_total{reason="hello"}`:        "1",
		`felix_internal_listener_connections_refused_total{reason="limit"}`:        "0",
		`felix_internal_listener_requests_total{kind="AuthorizedForwardPublish"}`:  "1",
		`felix_internal_listener_requests_total{kind="ForwardPublish"}`:            "1",
		`felix_internal_listener_requests_total{kind="unknown"}`:                   "1",
		"felix_internal_listener_unsupported_kind_total":                           "2",
		`felix_internal_listener_malformed_frames_total{closed="stream"}`:          "1",
		`felix_internal_listener_malformed_frames_total{closed="connection"}`:      "0",
		`felix_internal_listener_connections_refused_total{reason="unauthorized"}`: "0",
		`felix_internal_listener_connections_refused_total{reason="version"}`:      "0",
	}
	waitFor(t, ctx, "the refusals counted", func() bool {
		return metricValue(set, `felix_internal_listener_connections_refused_total{reason="hello"}`) == "1"
	})
	checkSeries(t, set, want)
}

// refusedConnections makes one connection offering the client ALPN (refused in TLS) and one
// whose first frame is not Hello (closed by the listener).
func refusedConnections(t *testing.T, ctx context.Context, l *Listener) {
	t.Helper()
	clientALPN := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{netq.ALPNClient}}
	if c, err := quic.DialAddr(ctx, l.Addr().String(), clientALPN, &quic.Config{HandshakeIdleTimeout: 3 * time.Second}); err == nil {
		c.CloseWithError(0, "")
		t.Fatal("a client ALPN completed the handshake")
	}
	notHello, err := quic.DialAddr(ctx, l.Addr().String(), creds(t, "node-c", TLSFiles{}).ClientTLS("node-b"), &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer notHello.CloseWithError(0, "")
	s, err := notHello.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writeMsg(t, s, publish(2))
	waitFor(t, ctx, "the not-Hello connection refused", func() bool { return notHello.Context().Err() != nil })
}

// checkSeries compares each series of want with set and wants bytes counted both ways.
func checkSeries(t *testing.T, set *metrics.Set, want map[string]string) {
	t.Helper()
	for series, v := range want {
		if got := metricValue(set, series); got != v {
			t.Errorf("%s = %q, want %q", series, got, v)
		}
	}
	for _, series := range []string{"felix_internal_listener_received_bytes_total", "felix_internal_listener_sent_bytes_total"} {
		if got := metricValue(set, series); got == "" || got == "0" {
			t.Errorf("%s = %q, want bytes counted", series, got)
		}
	}
}
