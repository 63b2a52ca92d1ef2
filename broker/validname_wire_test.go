package broker

import (
	"strings"
	"testing"

	"github.com/quic-go/quic-go"

	"felix/netq"
	"felix/proto"
)

// readAnswer reads frames from st until an error or publish_error and returns its code
// and text.
func readAnswer(t *testing.T, st *quic.Stream) (proto.ErrorCode, string) {
	t.Helper()
	fr := netq.NewFrameReader(st, 1<<20)
	for {
		hdr, err := fr.ReadHeader()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		body, err := fr.ReadBody(hdr, nil)
		if err != nil {
			t.Fatalf("read body: %v", err)
		}
		m, err := proto.DecodeMessage(body)
		if err != nil {
			continue // a binary frame
		}
		switch m := m.(type) {
		case *proto.Error:
			return m.Code, m.Message
		case *proto.PublishError:
			return m.Code, m.Message
		}
	}
}

// A name the catalog could never have created (auth.ValidName) is answered malformed
// "invalid name" on the QUIC path — not not_found (an allow-all principal) or forbidden —
// for every request kind, publishes included (issue 23 item 9).
func TestInvalidNamesOnTheWireAnswerInvalidName(t *testing.T) {
	srv, stop := startInProcess(t, nil) // FELIX_AUTH=off: every principal allows all
	defer stop()
	flags := uint16(0x003F)
	id, key := uint64(9), "k"
	for name, m := range map[string]proto.Message{
		"subscribe":      &proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "a/b"},
		"publish":        &proto.Publish{TenantID: "default", Namespace: "default", Stream: "bad name", Payload: []byte("x"), RequestID: &id, Ack: proto.JSONAckPerMessage},
		"cache_get":      &proto.CacheGet{TenantID: "default", Namespace: "a:b", Cache: "c", Key: "k", RequestID: &id},
		"cache_put":      &proto.CachePut{TenantID: "default", Namespace: "default", Cache: "..", Key: "k", Value: []byte("v"), RequestID: &id},
		"group_poll":     &proto.GroupPoll{TenantID: "default", Namespace: "default", Stream: "s*", Group: "g", RequestID: id},
		"tenant":         &proto.CounterGet{TenantID: "", Namespace: "default", Cache: "c", Key: "k", RequestID: &id},
		"dead_letters":   &proto.DeadLettersList{TenantID: "default", Namespace: "default", Stream: "tab\there", Group: "g", RequestID: id},
		"route_lookup":   &proto.RouteLookup{TenantID: "default", Namespace: "default", Stream: strings.Repeat("x", 256), RequestID: id},
		"counter_add":    &proto.CounterAdd{TenantID: "default", Namespace: "default", Cache: "sp ace", Key: "k", Delta: 1, RequestID: &id},
		"cache_delete":   &proto.CacheDelete{TenantID: "default", Namespace: ".", Cache: "c", Key: "k", RequestID: &id},
		"publish_batch":  &proto.JSONPublishBatch{TenantID: "default", Namespace: "default", Stream: "a:b", Payloads: [][]byte{[]byte("x")}, RequestID: &id, Ack: proto.JSONAckPerMessage},
		"group_ack":      &proto.GroupAck{TenantID: "default", Namespace: "default", Stream: "a/b", Group: "g", RequestID: id},
		"dead_redrive":   &proto.DeadLettersRedrive{TenantID: "default", Namespace: "default", Stream: "a/b", Group: "g", RequestID: id},
		"group_nack":     &proto.GroupNack{TenantID: "default", Namespace: "default", Stream: "a/b", Group: "g", RequestID: id},
		"cache_watch":    &proto.CacheWatch{TenantID: "default", Namespace: "default", Cache: "a/b", Key: &key, RequestID: id},
		"valid, unknown": &proto.CacheGet{TenantID: "default", Namespace: "default", Cache: "nosuch", Key: "k", RequestID: &id},
	} {
		st := clientStream(t, srv, nil)
		st.Write(proto.AppendMessage(nil, &proto.Auth{TenantID: "default", ClientFlags: &flags, Features: []string{proto.FeatureErrorCodes}}))
		st.Write(proto.AppendMessage(nil, m))
		code, text := readAnswer(t, st)
		if name == "valid, unknown" {
			if code != proto.CodeNotFound {
				t.Errorf("%s: %s %q, want not_found", name, code, text)
			}
			continue
		}
		if code != proto.CodeMalformed || !strings.HasPrefix(text, "invalid name") {
			t.Errorf("%s: %s %q, want malformed \"invalid name ...\"", name, code, text)
		}
	}
}
