package proto

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// ErrUnknownMessageType: a JSON message whose "type" this build does not know. The broker
// answers error{code: malformed}; the stream stays usable.
var ErrUnknownMessageType = errors.New("unknown message type")

// msgSpec is what DecodeMessage knows about one message type: a constructor, the keys that
// must be present and non-null, and the keys that must be present but may be null.
type msgSpec struct {
	make     func() Message
	required []string
	nullable []string
}

var (
	tn    = []string{"tenant_id", "namespace"}
	tns   = []string{"tenant_id", "namespace", "stream"}
	tnck  = []string{"tenant_id", "namespace", "cache", "key"}
	group = []string{"tenant_id", "namespace", "stream", "shard", "group"}
)

func keys(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var msgSpecs = map[MessageType]msgSpec{
	TypeAuth:                 {make: func() Message { return new(Auth) }, required: []string{"tenant_id", "token"}},
	TypeAuthOK:               {make: func() Message { return new(AuthOK) }, required: []string{"server_flags"}},
	TypePublish:              {make: func() Message { return new(Publish) }, required: keys(tns, []string{"payload"})},
	TypePublishBatch:         {make: func() Message { return new(JSONPublishBatch) }, required: keys(tns, []string{"payloads"})},
	TypePublishOK:            {make: func() Message { return new(PublishOK) }, required: []string{"request_id"}},
	TypePublishError:         {make: func() Message { return new(PublishError) }, required: []string{"request_id", "message"}},
	TypeSubscribe:            {make: func() Message { return new(Subscribe) }, required: tns},
	TypeSubscribed:           {make: func() Message { return new(Subscribed) }, required: []string{"subscription_id"}},
	TypeSubscribeCursorError: {make: func() Message { return new(SubscribeCursorError) }, required: []string{"reason", "requested", "available"}},
	TypeEventStreamHello:     {make: func() Message { return new(EventStreamHello) }, required: []string{"subscription_id"}},
	TypeEvent:                {make: func() Message { return new(Event) }, required: keys(tns, []string{"payload"})},
	TypeEventBatch:           {make: func() Message { return new(JSONEventBatch) }, required: keys(tns, []string{"payloads"})},
	TypeCachePut:             {make: func() Message { return new(CachePut) }, required: keys(tnck, []string{"value"}), nullable: []string{"ttl_ms"}},
	TypeCacheGet:             {make: func() Message { return new(CacheGet) }, required: tnck},
	TypeCacheValue:           {make: func() Message { return new(CacheValue) }, required: tnck, nullable: []string{"value"}},
	TypeCacheOK:              {make: func() Message { return new(CacheOK) }, required: []string{"request_id"}},
	TypeOK:                   {make: func() Message { return new(OK) }},
	TypeError:                {make: func() Message { return new(Error) }, required: []string{"message"}},
	TypeCacheDelete:          {make: func() Message { return new(CacheDelete) }, required: tnck},
	TypeCacheDeleted:         {make: func() Message { return new(CacheDeleted) }, required: tnck, nullable: []string{"value"}},
	TypeCounterAdd:           {make: func() Message { return new(CounterAdd) }, required: keys(tnck, []string{"delta"})},
	TypeCounterGet:           {make: func() Message { return new(CounterGet) }, required: tnck},
	TypeCounterValue:         {make: func() Message { return new(CounterValue) }, required: keys(tnck, []string{"value"})},
	TypeGroupPoll:            {make: func() Message { return new(GroupPoll) }, required: keys(group, []string{"max_records", "max_wait_ms", "request_id"})},
	TypeGroupRecords:         {make: func() Message { return new(GroupRecords) }, required: []string{"request_id", "group", "shard", "records"}},
	TypeGroupAck:             {make: func() Message { return new(GroupAck) }, required: keys(group, []string{"offsets", "request_id"})},
	TypeGroupNack:            {make: func() Message { return new(GroupNack) }, required: keys(group, []string{"offsets", "request_id"})},
	TypeGroupOK:              {make: func() Message { return new(GroupOK) }, required: []string{"request_id"}},
	TypeDeadLettersList:      {make: func() Message { return new(DeadLettersList) }, required: keys(group, []string{"from_offset", "limit", "request_id"})},
	TypeDeadLetters:          {make: func() Message { return new(DeadLetters) }, required: []string{"request_id", "group", "shard", "entries"}},
	TypeDeadLettersRedrive:   {make: func() Message { return new(DeadLettersRedrive) }, required: keys(group, []string{"offsets", "request_id"})},
	TypeCacheWatch:           {make: func() Message { return new(CacheWatch) }, required: keys(tn, []string{"cache", "request_id"})},
	TypeCacheWatching:        {make: func() Message { return new(CacheWatching) }, required: []string{"request_id", "watch_id"}},
	TypeCacheChange:          {make: func() Message { return new(CacheChange) }, required: []string{"watch_id", "key", "op", "offset"}, nullable: []string{"value"}},
	TypeCacheUnwatch:         {make: func() Message { return new(CacheUnwatch) }, required: []string{"watch_id"}},
	TypeNotLeader:            {make: func() Message { return new(NotLeader) }, required: keys(tns, []string{"shard", "owner", "generation"})},
	TypeRouteLookup:          {make: func() Message { return new(RouteLookup) }, required: keys(tns, []string{"request_id"})},
	TypeRoute:                {make: func() Message { return new(Route) }, required: []string{"request_id", "shards"}},
}

// presence records, for one top-level field, whether it was null and (for short strings,
// i.e. "type") its value, without copying the raw bytes of large fields such as payloads.
type presence struct {
	null     bool
	isString bool
	str      string
}

// UnmarshalJSON implements json.Unmarshaler.
func (p *presence) UnmarshalJSON(b []byte) error {
	p.null = bytes.Equal(b, []byte("null"))
	if len(b) > 0 && b[0] == '"' && len(b) <= 64 {
		p.isString = true
		return json.Unmarshal(b, &p.str)
	}
	return nil
}

// DecodeMessage decodes the body of an FLX1 frame with flags 0 into its concrete message
// (a pointer type such as *Auth; type-switch on the result). Rules (spec/client-protocol.md
// §6): the body must be valid UTF-8 and one JSON object; "type" selects the message; every
// required field must be present and non-null (ttl_ms and the cache value fields may be
// null, never absent); unknown fields are ignored; enum fields (ack, start, reason, op) must
// hold a defined value. Errors are *DecodeError wrapping ErrInvalidUTF8, ErrMalformed,
// ErrIncomplete (a required field missing) or ErrUnknownMessageType. Byte fields in the
// result are freshly allocated (base64-decoded), strings are copies: nothing aliases body.
func DecodeMessage(body []byte) (Message, error) {
	if !utf8.Valid(body) {
		return nil, decodeErr("json", invalidUTF8Offset(body), ErrInvalidUTF8)
	}
	if m, ok := decodeMessageFast(body); ok {
		if err := validateMessage(m); err != nil {
			return nil, err
		}
		return m, nil
	}
	return decodeMessageJSON(body)
}

// decodeMessageJSON is DecodeMessage through encoding/json, for every body the fast path
// (msgfast.go) does not take.
func decodeMessageJSON(body []byte) (Message, error) {
	var fields map[string]presence
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, jsonErr(err)
	}
	rawType, ok := fields["type"]
	if !ok {
		return nil, decodeErr("type", 0, ErrIncomplete)
	}
	if !rawType.isString {
		return nil, decodeErr("type", 0, ErrMalformed)
	}
	spec, ok := msgSpecs[MessageType(rawType.str)]
	if !ok {
		return nil, decodeErr("type", 0, ErrUnknownMessageType)
	}
	for _, k := range spec.required {
		v, ok := fields[k]
		if !ok {
			return nil, decodeErr(k, 0, ErrIncomplete)
		}
		if v.null {
			return nil, decodeErr(k, 0, ErrMalformed)
		}
	}
	for _, k := range spec.nullable {
		if _, ok := fields[k]; !ok {
			return nil, decodeErr(k, 0, ErrIncomplete)
		}
	}
	m := spec.make()
	if err := json.Unmarshal(body, m); err != nil {
		return nil, jsonErr(err)
	}
	if err := validateMessage(m); err != nil {
		return nil, err
	}
	return m, nil
}

func invalidUTF8Offset(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// jsonErr maps encoding/json errors to *DecodeError with the best field/offset known.
func jsonErr(err error) error {
	var de *DecodeError
	if errors.As(err, &de) {
		return de
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return decodeErr("json", int(se.Offset), ErrMalformed)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "json"
		}
		return decodeErr(field, int(te.Offset), ErrMalformed)
	}
	return decodeErr("json", 0, ErrMalformed)
}

func validateAck(a JSONAck) error {
	switch a {
	case "", JSONAckNone, JSONAckPerMessage, JSONAckPerBatch:
		return nil
	}
	return decodeErr("ack", 0, ErrMalformed)
}

func validateIdempotent(idempotent bool, producerID string, requestID *uint64) error {
	if !idempotent {
		return nil
	}
	if producerID == "" {
		return decodeErr("producer_id", 0, ErrIncomplete)
	}
	if requestID == nil {
		return decodeErr("request_id", 0, ErrIncomplete)
	}
	return nil
}

// validateKey checks a decoded routing key: absent (nil) or 1..MaxKeyLen bytes (D15); a
// present empty key ("key":"") is ErrMalformed, so "no key" has one spelling.
func validateKey(k []byte) error {
	if k != nil && (len(k) == 0 || len(k) > MaxKeyLen) {
		return decodeErr("key", 0, ErrMalformed)
	}
	return nil
}

// validateMessage checks enum values and cross-field rules encoding/json cannot express.
func validateMessage(m Message) error {
	switch m := m.(type) {
	case *Publish:
		if err := validateAck(m.Ack); err != nil {
			return err
		}
		if err := validateKey(m.Key); err != nil {
			return err
		}
		return validateIdempotent(m.Idempotent, m.ProducerID, m.RequestID)
	case *JSONPublishBatch:
		if err := validateAck(m.Ack); err != nil {
			return err
		}
		if err := validateKey(m.Key); err != nil {
			return err
		}
		return validateIdempotent(m.Idempotent, m.ProducerID, m.RequestID)
	case *SubscribeCursorError:
		if m.Reason != CursorTooOld && m.Reason != CursorInFuture {
			return decodeErr("reason", 0, ErrMalformed)
		}
	case *JSONEventBatch:
		if m.Publishers != nil && len(m.Publishers) != len(m.Payloads) {
			return decodeErr("publishers", 0, ErrMalformed)
		}
	case *CacheWatch:
		if (m.Key == nil) == (m.Prefix == nil) {
			return decodeErr("key", 0, ErrMalformed)
		}
	case *CacheChange:
		switch m.Op {
		case CacheChangePut, CacheChangeDelete, CacheChangeExpire:
		default:
			return decodeErr("op", 0, ErrMalformed)
		}
	}
	return nil
}
