package proto

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// sampleMessages returns one populated value of every JSON message type.
func sampleMessages() []Message {
	key, prefix := "cfg", "cf"
	return []Message{
		&Auth{TenantID: "t1", Token: "tok", ClientFlags: Ptr[uint16](6207), Features: []string{FeatureCounters, FeatureGroups}},
		&AuthOK{ServerFlags: 6207, Features: []string{FeatureCounters}},
		&Publish{TenantID: "t1", Namespace: "default", Stream: "s", Payload: []byte("hi"), RequestID: Ptr[uint64](1), Ack: JSONAckPerBatch, ProducerID: "p", Idempotent: true},
		&JSONPublishBatch{TenantID: "t1", Namespace: "default", Stream: "s", Payloads: [][]byte{[]byte("a"), {}}, RequestID: Ptr[uint64](2), Ack: JSONAckNone},
		&Publish{TenantID: "t1", Namespace: "default", Stream: "s", Key: []byte{0, 0xFF}, Payload: []byte("hi")},
		&JSONPublishBatch{TenantID: "t1", Namespace: "default", Stream: "s", Key: []byte("order-7"), Payloads: [][]byte{[]byte("a")}, RequestID: Ptr[uint64](3), ProducerID: "p", Idempotent: true},
		&PublishOK{RequestID: 1, FirstOffset: Ptr[uint64](10), LastOffset: Ptr[uint64](11), Duplicate: true},
		&PublishOK{RequestID: 2, Shard: Ptr[uint32](3)},
		&PublishError{RequestID: 1, Message: "nope", Code: CodeOverloaded},
		&Subscribe{TenantID: "t1", Namespace: "default", Stream: "s", Start: &Start{Kind: StartOffset, Offset: 5}, Shard: Ptr[uint32](2), WithPublisher: true},
		&Subscribed{SubscriptionID: 9},
		&SubscribeCursorError{Reason: CursorTooOld, Requested: 1, Available: 5},
		&EventStreamHello{SubscriptionID: 9},
		&Event{TenantID: "t1", Namespace: "default", Stream: "s", Payload: []byte("x"), Offset: Ptr[uint64](3), Publisher: "abc"},
		&JSONEventBatch{TenantID: "t1", Namespace: "default", Stream: "s", Payloads: [][]byte{[]byte("x")}, BaseOffset: Ptr[uint64](3), SkippedBefore: 1, Publishers: []string{""}},
		&CachePut{TenantID: "t1", Namespace: "default", Cache: "c", Key: "k", Value: []byte("v"), RequestID: Ptr[uint64](4)},
		&CacheGet{TenantID: "t1", Namespace: "default", Cache: "c", Key: "k", RequestID: Ptr[uint64](4)},
		&CacheValue{TenantID: "t1", Namespace: "default", Cache: "c", Key: "k", Value: []byte{}},
		&CacheOK{RequestID: 4},
		&OK{},
		&Error{Message: "x", Code: CodeNotFound, RequestID: Ptr[uint64](4)},
		&CacheDelete{TenantID: "t1", Namespace: "default", Cache: "c", Key: "k", RequestID: Ptr[uint64](11)},
		&CacheDeleted{TenantID: "t1", Namespace: "default", Cache: "c", Key: "k", RequestID: Ptr[uint64](11)},
		&CounterAdd{TenantID: "t1", Namespace: "default", Cache: "c", Key: "hits", Delta: -3, RequestID: Ptr[uint64](12)},
		&CounterGet{TenantID: "t1", Namespace: "default", Cache: "c", Key: "hits"},
		&CounterValue{TenantID: "t1", Namespace: "default", Cache: "c", Key: "hits", Value: -1 << 63},
		&CounterValue{TenantID: "t1", Namespace: "default", Cache: "c", Key: "never", RequestID: Ptr[uint64](13), Found: Ptr(false)},
		&CounterValue{TenantID: "t1", Namespace: "default", Cache: "c", Key: "hits", Value: 0, Found: Ptr(true)},
		&GroupPoll{TenantID: "t1", Namespace: "default", Stream: "o", Shard: 0, Group: "g", MaxRecords: 100, MaxWaitMs: 1000, RequestID: 20},
		&GroupRecords{RequestID: 20, Group: "g", Records: []GroupRecord{{Offset: 41, Payload: []byte("p"), Delivery: 1, Publisher: "me"}, {Offset: 42, Payload: []byte{}, Delivery: 2}}},
		&GroupAck{TenantID: "t1", Namespace: "default", Stream: "o", Group: "g", Offsets: []uint64{41}, RequestID: 21},
		&GroupNack{TenantID: "t1", Namespace: "default", Stream: "o", Group: "g", Offsets: []uint64{42}, RedeliverAfterMs: Ptr[uint64](500), RequestID: 22},
		&GroupOK{RequestID: 24, Count: Ptr[uint64](1)},
		&DeadLettersList{TenantID: "t1", Namespace: "default", Stream: "o", Group: "g", Limit: 100, RequestID: 23},
		&DeadLetters{RequestID: 23, Group: "g", Entries: []DeadLetter{{Offset: 42, Deliveries: 5, DeadLetteredAtMs: 1767225600000}}, NextFrom: Ptr[uint64](43)},
		&DeadLettersRedrive{TenantID: "t1", Namespace: "default", Stream: "o", Group: "g", Offsets: []uint64{42}, RequestID: 24},
		&CacheWatch{TenantID: "t1", Namespace: "default", Cache: "c", Key: &key, RequestID: 30},
		&CacheWatch{TenantID: "t1", Namespace: "default", Cache: "c", Prefix: &prefix, RequestID: 31},
		&CacheWatch{TenantID: "t1", Namespace: "default", Cache: "c", Key: &key, FromOffset: Ptr[uint64](0), RequestID: 32},
		&CacheWatching{RequestID: 30, WatchID: 9001},
		&CacheChange{WatchID: 9001, Key: "cfg", Op: CacheChangePut, Value: []byte("v"), Offset: 77},
		&CacheUnwatch{WatchID: 9001, RequestID: Ptr[uint64](32)},
		&NotLeader{RequestID: Ptr[uint64](5), TenantID: "t1", Namespace: "default", Stream: "o", Shard: 2, Owner: Owner{NodeID: "b2", Address: "127.0.0.1:5000"}, Generation: 7},
		&RouteLookup{TenantID: "t1", Namespace: "default", Stream: "o", RequestID: 6},
		&Route{RequestID: 6, Shards: []ShardRoute{{Shard: 0, Owner: Owner{NodeID: "b1", Address: "127.0.0.1:5000"}, Generation: 7}}},
		&Route{RequestID: 7, Shards: []ShardRoute{{Shard: 0, Owner: Owner{NodeID: "b1", Address: "127.0.0.1:5000"}, Generation: 7}}, Routing: "jump_hash"},
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	seen := map[MessageType]bool{}
	for _, m := range sampleMessages() {
		seen[m.Type()] = true
		body := m.AppendJSON(nil)
		if !json.Valid(body) {
			t.Fatalf("%s: invalid JSON %s", m.Type(), body)
		}
		got, err := DecodeMessage(body)
		if err != nil {
			t.Fatalf("%s: %v\n%s", m.Type(), err, body)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%s: round trip\n got %#v\nwant %#v", m.Type(), got, m)
		}
		if again := got.AppendJSON(nil); !bytes.Equal(again, body) {
			t.Fatalf("%s: re-encode differs\n%s\n%s", m.Type(), again, body)
		}
	}
	for typ := range msgSpecs {
		if !seen[typ] {
			t.Errorf("no sample for %s", typ)
		}
	}
}

// TestSpecExtensionExamples: the §8 examples of spec/client-protocol.md that our decisions
// keep byte-for-byte (docs/client-protocol.md lists the ones that differ and why).
func TestSpecExtensionExamples(t *testing.T) {
	examples := []string{
		`{"type":"auth","tenant_id":"t1","token":"x","client_flags":6207,"features":["cache_delete","counters","groups","cache_watch","idempotent_publish","redirects","error_codes","publishers"]}`,
		`{"type":"auth_ok","server_flags":6207,"features":["cache_delete","counters","groups","cache_watch","idempotent_publish","redirects","error_codes","publishers"]}`,
		`{"type":"cache_delete","tenant_id":"t1","namespace":"default","cache":"primary","key":"k","request_id":11}`,
		`{"type":"cache_deleted","tenant_id":"t1","namespace":"default","cache":"primary","key":"k","value":null,"request_id":11}`,
		`{"type":"cache_deleted","tenant_id":"t1","namespace":"default","cache":"primary","key":"k","value":"","request_id":11}`,
		`{"type":"counter_add","tenant_id":"t1","namespace":"default","cache":"primary","key":"hits","delta":1,"request_id":12}`,
		`{"type":"counter_get","tenant_id":"t1","namespace":"default","cache":"primary","key":"hits","request_id":13}`,
		`{"type":"counter_value","tenant_id":"t1","namespace":"default","cache":"primary","key":"hits","value":42,"request_id":12}`,
		`{"type":"group_records","request_id":20,"group":"billing","shard":0,"records":[{"offset":41,"payload":"eA==","delivery":1}]}`,
		`{"type":"group_ack","tenant_id":"t1","namespace":"default","stream":"orders","shard":0,"group":"billing","offsets":[41],"request_id":21}`,
		`{"type":"group_nack","tenant_id":"t1","namespace":"default","stream":"orders","shard":0,"group":"billing","offsets":[42],"redeliver_after_ms":500,"request_id":22}`,
		`{"type":"group_ok","request_id":21}`,
		`{"type":"dead_letters_list","tenant_id":"t1","namespace":"default","stream":"orders","shard":0,"group":"billing","from_offset":0,"limit":100,"request_id":23}`,
		`{"type":"dead_letters","request_id":23,"group":"billing","shard":0,"entries":[{"offset":42,"deliveries":5,"dead_lettered_at_ms":1767225600000}],"next_from":43}`,
		`{"type":"dead_letters_redrive","tenant_id":"t1","namespace":"default","stream":"orders","shard":0,"group":"billing","offsets":[42],"request_id":24}`,
		`{"type":"group_ok","request_id":24,"count":1}`,
		`{"type":"cache_watch","tenant_id":"t1","namespace":"default","cache":"primary","key":"cfg","request_id":30}`,
		`{"type":"cache_watch","tenant_id":"t1","namespace":"default","cache":"primary","key":"cfg","from_offset":78,"request_id":30}`,
		`{"type":"cache_watching","request_id":30,"watch_id":9001}`,
		`{"type":"cache_change","watch_id":9001,"key":"cfg","op":"delete","value":null,"offset":77}`,
		`{"type":"not_leader","request_id":5,"tenant_id":"t1","namespace":"default","stream":"orders","shard":2,"owner":{"node_id":"broker-2.felix.svc","address":"10.0.0.12:5000"},"generation":7}`,
		`{"type":"route_lookup","tenant_id":"t1","namespace":"default","stream":"orders","request_id":6}`,
		`{"type":"route","request_id":6,"shards":[{"shard":0,"owner":{"node_id":"a","address":"b"},"generation":7}]}`,
		`{"type":"route","request_id":6,"shards":[{"shard":0,"owner":{"node_id":"a","address":"b"},"generation":7}],"routing":"jump_hash"}`,
		`{"type":"subscribe","tenant_id":"t1","namespace":"default","stream":"demo","start":"earliest","shard":1,"with_publisher":true}`,
		`{"type":"subscribe","tenant_id":"t1","namespace":"default","stream":"demo","start":{"offset":7}}`,
		`{"type":"event_batch","tenant_id":"t1","namespace":"default","stream":"s","payloads":[],"base_offset":4,"skipped_before":1}`,
		`{"type":"error","message":"moved","code":"leadership_lost","request_id":3}`,
		`{"type":"publish_ok","request_id":1,"first_offset":5,"last_offset":9,"duplicate":true}`,
		`{"type":"publish","tenant_id":"t1","namespace":"default","stream":"orders","key":"b3JkZXItNDI=","payload":"aGk=","request_id":1}`,
		`{"type":"publish_batch","tenant_id":"t1","namespace":"default","stream":"orders","key":"AA==","payloads":["eA=="],"request_id":2,"ack":"per_batch"}`,
		`{"type":"publish_ok","request_id":1,"first_offset":5,"last_offset":5,"shard":3}`,
		`{"type":"cache_put","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":"","ttl_ms":null}`,
		`{"type":"event","tenant_id":"t1","namespace":"default","stream":"s","payload":"","publisher":"ab\"\\\n\u0001é"}`,
	}
	for _, ex := range examples {
		m, err := DecodeMessage([]byte(ex))
		if err != nil {
			t.Fatalf("%s: %v", ex, err)
		}
		if got := m.AppendJSON(nil); string(got) != ex {
			t.Fatalf("re-encode\n got %s\nwant %s", got, ex)
		}
	}
}

func TestMessageNullsAndPresence(t *testing.T) {
	miss, _ := DecodeMessage([]byte(`{"type":"cache_value","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":null}`))
	empty, _ := DecodeMessage([]byte(`{"type":"cache_value","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":""}`))
	if miss.(*CacheValue).Value != nil || empty.(*CacheValue).Value == nil {
		t.Fatal("null and empty value not distinguished")
	}
	put, err := DecodeMessage([]byte(`{"type":"cache_put","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":"","ttl_ms":null}`))
	if err != nil || put.(*CachePut).TTLMs != nil {
		t.Fatalf("ttl null: %v", err)
	}
	// Always-present fields: absent is an error, null encodes as null.
	for _, body := range []string{
		`{"type":"cache_put","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":""}`,
		`{"type":"cache_value","tenant_id":"t","namespace":"n","cache":"c","key":"k"}`,
	} {
		if _, err := DecodeMessage([]byte(body)); !errors.Is(err, ErrIncomplete) {
			t.Errorf("%s: %v", body, err)
		}
	}
	if got := string((&JSONPublishBatch{TenantID: "t", Namespace: "n", Stream: "s"}).AppendJSON(nil)); got != `{"type":"publish_batch","tenant_id":"t","namespace":"n","stream":"s","payloads":[]}` {
		t.Fatalf("nil payloads: %s", got)
	}
}

func TestDecodeMessageErrors(t *testing.T) {
	cases := []struct {
		body  string
		want  error
		field string
	}{
		{`{"type":"ok"`, ErrMalformed, "json"},
		{`[1,2]`, ErrMalformed, "json"},
		{`{"tenant_id":"t"}`, ErrIncomplete, "type"},
		{`{"type":7}`, ErrMalformed, "type"},
		{`{"type":"teleport"}`, ErrUnknownMessageType, "type"},
		{`{"type":"publish","tenant_id":"t","namespace":"n","payload":""}`, ErrIncomplete, "stream"},
		{`{"type":"publish","tenant_id":null,"namespace":"n","stream":"s","payload":""}`, ErrMalformed, "tenant_id"},
		{`{"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":"!!"}`, ErrMalformed, "json"},
		{`{"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":"","ack":"always"}`, ErrMalformed, "ack"},
		{`{"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":"","idempotent":true,"request_id":1}`, ErrIncomplete, "producer_id"},
		{`{"type":"auth","tenant_id":"t","token":"x","client_flags":70000}`, ErrMalformed, "client_flags"},
		{`{"type":"publish_ok","request_id":-1}`, ErrMalformed, "request_id"},
		{`{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":"yesterday"}`, ErrMalformed, "start"},
		{`{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":{"offset":"x"}}`, ErrMalformed, "start"},
		{`{"type":"subscribe_cursor_error","reason":"bored","requested":1,"available":2}`, ErrMalformed, "reason"},
		{`{"type":"cache_watch","tenant_id":"t","namespace":"n","cache":"c","request_id":1}`, ErrMalformed, "key"},
		{`{"type":"cache_watch","tenant_id":"t","namespace":"n","cache":"c","key":"a","prefix":"b","request_id":1}`, ErrMalformed, "key"},
		{`{"type":"cache_change","watch_id":1,"key":"k","op":"zap","value":null,"offset":1}`, ErrMalformed, "op"},
		{`{"type":"event_batch","tenant_id":"t","namespace":"n","stream":"s","payloads":[""],"publishers":[]}`, ErrMalformed, "publishers"},
		{"{\"type\":\"error\",\"message\":\"\xff\"}", ErrInvalidUTF8, "json"},
		{`{"type":"publish","tenant_id":"t","namespace":"n","stream":"s","key":"","payload":""}`, ErrMalformed, "key"},
		{`{"type":"publish_batch","tenant_id":"t","namespace":"n","stream":"s","key":"!!","payloads":[]}`, ErrMalformed, "json"},
	}
	for _, tc := range cases {
		_, err := DecodeMessage([]byte(tc.body))
		de, ok := errors.AsType[*DecodeError](err)
		if !ok || !errors.Is(err, tc.want) || de.Field != tc.field {
			t.Errorf("%s: %v, want %v in field %s", tc.body, err, tc.want, tc.field)
		}
	}
}

func TestPublishKeyLimits(t *testing.T) {
	long := &Publish{TenantID: "t", Namespace: "n", Stream: "s", Key: bytes.Repeat([]byte("k"), MaxKeyLen+1), Payload: []byte{}}
	if _, err := DecodeMessage(long.AppendJSON(nil)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("key of %d bytes: %v", MaxKeyLen+1, err)
	}
	long.Key = long.Key[:MaxKeyLen]
	m, err := DecodeMessage(long.AppendJSON(nil))
	if err != nil || len(m.(*Publish).Key) != MaxKeyLen {
		t.Fatalf("key of %d bytes: %v", MaxKeyLen, err)
	}
	// An empty key is written as absent, never as "key":"".
	if got := string((&Publish{TenantID: "t", Namespace: "n", Stream: "s", Key: []byte{}, Payload: []byte{}}).AppendJSON(nil)); got != `{"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":""}` {
		t.Fatalf("empty key: %s", got)
	}
}

func TestDecodeMessageIgnoresUnknownFields(t *testing.T) {
	m, err := DecodeMessage([]byte(`{"type":"subscribed","subscription_id":4,"shiny":{"a":[1,2]},"z":null}`))
	if err != nil || m.(*Subscribed).SubscriptionID != 4 {
		t.Fatalf("%v %v", m, err)
	}
	// A legacy broker's auth_ok without features, a legacy client's auth without client_flags.
	m, err = DecodeMessage([]byte(`{"type":"auth","tenant_id":"t1","token":"x"}`))
	if err != nil || m.(*Auth).ClientFlags != nil {
		t.Fatalf("legacy auth %v %v", m, err)
	}
}

func TestAppendMessageFrame(t *testing.T) {
	f := AppendMessage([]byte("prefix"), &OK{})
	if string(f[:6]) != "prefix" {
		t.Fatal("dst clobbered")
	}
	h, err := DecodeHeader(f[6:], DefaultMaxFrameBytes)
	if err != nil || h.Flags != 0 || int(h.Length) != len(f)-6-HeaderSize {
		t.Fatalf("%+v %v", h, err)
	}
	// Invalid UTF-8 in a Go string becomes U+FFFD, so the output always decodes.
	body := (&Error{Message: "a\xffb"}).AppendJSON(nil)
	m, err := DecodeMessage(body)
	if err != nil || m.(*Error).Message != "a\uFFFDb" {
		t.Fatalf("%s %v", body, err)
	}
}

// TestCounterValueFound: counter_value's additive found? field. An older broker's answer
// (no field) reads as found; found:false is a counter_get of a counter that does not exist.
func TestCounterValueFound(t *testing.T) {
	for body, want := range map[string]bool{
		`{"type":"counter_value","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":0,"request_id":1}`:               true,
		`{"type":"counter_value","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":0,"request_id":1,"found":false}`: false,
		`{"type":"counter_value","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":0,"found":true}`:                 true,
	} {
		m, err := DecodeMessage([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if got := m.(*CounterValue).IsFound(); got != want {
			t.Fatalf("%s: IsFound %v, want %v", body, got, want)
		}
	}
	got := string((&CounterValue{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Found: Ptr(false)}).AppendJSON(nil))
	if want := `{"type":"counter_value","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":0,"found":false}`; got != want {
		t.Fatalf("encode: %s, want %s", got, want)
	}
}
