package broker

import (
	"strings"
	"testing"

	"github.com/quic-go/quic-go"

	"felix/netq"
	"felix/proto"
)

// Every message type a client may send has exactly one handler; the answers and events
// only a broker sends have none (they answer "unexpected message type").
func TestHandlerTableCoversTheClientMessages(t *testing.T) {
	client := []proto.MessageType{proto.TypeAuth, proto.TypePublish, proto.TypePublishBatch, proto.TypeSubscribe,
		proto.TypeCachePut, proto.TypeCacheGet, proto.TypeCacheDelete, proto.TypeCounterAdd, proto.TypeCounterGet,
		proto.TypeGroupPoll, proto.TypeGroupAck, proto.TypeGroupNack, proto.TypeDeadLettersList, proto.TypeDeadLettersRedrive,
		proto.TypeCacheWatch, proto.TypeCacheUnwatch, proto.TypeRouteLookup}
	for _, typ := range client {
		if h, ok := clientHandlers[typ]; !ok || h.serve == nil {
			t.Errorf("no handler for %s", typ)
		}
	}
	if len(clientHandlers) != len(client) {
		t.Errorf("%d handlers, want %d", len(clientHandlers), len(client))
	}
	for _, typ := range []proto.MessageType{proto.TypeAuthOK, proto.TypeSubscribed, proto.TypeEventStreamHello, proto.TypeCacheValue, proto.TypeError, proto.TypeOK} {
		if _, ok := clientHandlers[typ]; ok {
			t.Errorf("a handler for the broker-only %s", typ)
		}
	}
	for typ, h := range clientHandlers {
		uni := typ == proto.TypeAuth || typ == proto.TypePublish || typ == proto.TypePublishBatch
		if h.uni != uni || h.beforeAuth != (typ == proto.TypeAuth) {
			t.Errorf("%s: uni %v beforeAuth %v", typ, h.uni, h.beforeAuth)
		}
	}
}

// readError reads frames from st until an error frame and returns it.
func readError(t *testing.T, st *quic.Stream) *proto.Error {
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
			t.Fatalf("decode: %v", err)
		}
		if e, ok := m.(*proto.Error); ok {
			return e
		}
	}
}

// The table's dispatch on a live stream: a data message before auth answers "auth
// required"; after auth a broker-only type answers the typed unexpected-type error and a
// cache call is routed to its handler (an unknown cache: not_found).
func TestDispatchThroughTheTable(t *testing.T) {
	srv, stop := startInProcess(t, nil)
	defer stop()
	st := clientStream(t, srv, nil)
	flags := uint16(0x003F)
	id := uint64(7)
	st.Write(proto.AppendMessage(nil, &proto.CacheGet{TenantID: "default", Namespace: "default", Cache: "c", Key: "k", RequestID: &id}))
	if e := readError(t, st); e.Code != proto.CodeUnauthorized || e.Message != "auth required" {
		t.Fatalf("before auth: %+v", e)
	}
	st.Write(proto.AppendMessage(nil, &proto.Auth{TenantID: "default", ClientFlags: &flags, Features: []string{proto.FeatureErrorCodes}}))
	st.Write(proto.AppendMessage(nil, &proto.Subscribed{SubscriptionID: 1}))
	if e := readError(t, st); e.Code != proto.CodeMalformed || !strings.Contains(e.Message, "unexpected message type subscribed") {
		t.Fatalf("a broker-only message: %+v", e)
	}
	st.Write(proto.AppendMessage(nil, &proto.CacheGet{TenantID: "default", Namespace: "default", Cache: "c", Key: "k", RequestID: &id}))
	if e := readError(t, st); e.Code != proto.CodeNotFound || e.RequestID == nil || *e.RequestID != id {
		t.Fatalf("cache_get of an unknown cache: %+v", e)
	}
}
