package proto

import "encoding/base64"

// The fast path of DecodeMessage for the messages of one cache or counter operation: the
// requests (cache_get, cache_put, cache_delete, counter_add, counter_get) the broker reads
// and the answers (cache_value, cache_ok, cache_deleted, counter_value) the client reads.
// It accepts only the plain form every encoder here writes: one flat object, no escapes in
// keys or strings, integers without fraction or exponent, each key exactly a field's name
// and at most once, every required field present. Anything else (including every error case) reports false and
// DecodeMessage falls back to encoding/json, so the two paths never disagree: what the fast
// path accepts, the slow path decodes to the same struct (docs/bench/perf.md).

// maxFastFields bounds the top-level keys the fast path takes (the largest message it
// handles, cache_put, has 8 keys with "type").
const maxFastFields = 10

// fastTok is one top-level key and its value: the bytes between the quotes of a string
// (kind 's'), the literal of an integer (kind 'n') or null (kind 'z').
type fastTok struct {
	key  []byte
	val  []byte
	kind byte
}

// fastFields lists a body's top-level keys and values.
type fastFields struct {
	toks [maxFastFields]fastTok
	n    int
}

// scan fills f from body; false when body is not in the plain form (see above).
func (f *fastFields) scan(body []byte) bool {
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i = skipWS(body, i+1)
	if i < len(body) && body[i] == '}' {
		return false // no "type": let the slow path report it
	}
	for {
		if f.n == maxFastFields {
			return false
		}
		t := &f.toks[f.n]
		var ok bool
		if t.key, i, ok = scanPlainString(body, i); !ok {
			return false
		}
		i = skipWS(body, i)
		if i >= len(body) || body[i] != ':' {
			return false
		}
		i = skipWS(body, i+1)
		if i >= len(body) {
			return false
		}
		switch c := body[i]; {
		case c == '"':
			t.kind = 's'
			if t.val, i, ok = scanPlainString(body, i); !ok {
				return false
			}
		case c == '-' || (c >= '0' && c <= '9'):
			t.kind = 'n'
			if t.val, i, ok = scanPlainInt(body, i); !ok {
				return false
			}
		case c == 'n' && len(body)-i >= 4 && string(body[i:i+4]) == "null":
			t.kind = 'z'
			t.val = nil
			i += 4
		default:
			return false
		}
		f.n++
		i = skipWS(body, i)
		if i >= len(body) {
			return false
		}
		if body[i] == '}' {
			return skipWS(body, i+1) == len(body)
		}
		if body[i] != ',' {
			return false
		}
		i = skipWS(body, i+1)
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanPlainString reads a string at b[i] == '"' holding no escape and no control byte; it
// returns the bytes between the quotes and the index after the closing quote.
func scanPlainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, i, false
		}
	}
	return nil, i, false
}

// scanPlainInt reads -?(0|[1-9][0-9]*) not followed by a fraction or exponent.
func scanPlainInt(b []byte, i int) ([]byte, int, bool) {
	start := i
	if b[i] == '-' {
		i++
	}
	d := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == d || (b[d] == '0' && i-d > 1) {
		return nil, start, false
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return nil, start, false
	}
	return b[start:i], i, true
}

// fastUint parses a plain non-negative integer literal that fits uint64.
func fastUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 || b[0] == '-' {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// fastInt parses a plain integer literal that fits int64.
func fastInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	u, ok := fastUint(b)
	if !ok {
		return 0, false
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}

// fastKey holds the fields shared by the cache and counter requests.
type fastKey struct {
	tenant, namespace, cache, key string
	requestID                     *uint64
}

// Bits of the fields seen, to reject duplicates and check required ones.
const (
	fbType = 1 << iota
	fbTenant
	fbNamespace
	fbCache
	fbKey
	fbRequestID
	fbValue
	fbTTL
	fbDelta
	fbRequired = fbType | fbTenant | fbNamespace | fbCache | fbKey
)

// fastKeyField stores t into k when t is one of the shared fields; it returns the field's
// bit, or 0 when t is not one of them, or -1 when t is one with the wrong kind of value.
func fastKeyField(t *fastTok, k *fastKey) int {
	var dst *string
	bit := 0
	switch string(t.key) {
	case "type":
		return fbType
	case "tenant_id":
		dst, bit = &k.tenant, fbTenant
	case "namespace":
		dst, bit = &k.namespace, fbNamespace
	case "cache":
		dst, bit = &k.cache, fbCache
	case "key":
		dst, bit = &k.key, fbKey
	case "request_id":
		switch t.kind {
		case 'z':
			return fbRequestID
		case 'n':
			v, ok := fastUint(t.val)
			if !ok {
				return -1
			}
			k.requestID = &v
			return fbRequestID
		}
		return -1
	default:
		return 0
	}
	if t.kind != 's' {
		return -1
	}
	*dst = string(t.val)
	return bit
}

// fastShape is what one message type takes on the fast path: the fields it needs present
// (and non-null, but for a nullable value), the fields it allows, and the kind of "value".
type fastShape struct {
	need, allow int
	value       byte // 'b' base64 bytes, 'B' base64 bytes or null, 'i' int64
}

var (
	fastKeyed  = fastShape{need: fbRequired, allow: fbRequired | fbRequestID}
	fastShapes = map[MessageType]fastShape{
		TypeCacheGet:     fastKeyed,
		TypeCacheDelete:  fastKeyed,
		TypeCounterGet:   fastKeyed,
		TypeCachePut:     {need: fbRequired | fbValue | fbTTL, allow: fbRequired | fbRequestID | fbValue | fbTTL, value: 'b'},
		TypeCounterAdd:   {need: fbRequired | fbDelta, allow: fbRequired | fbRequestID | fbDelta},
		TypeCacheValue:   {need: fbRequired | fbValue, allow: fbRequired | fbRequestID | fbValue, value: 'B'},
		TypeCacheDeleted: {need: fbRequired | fbValue, allow: fbRequired | fbRequestID | fbValue, value: 'B'},
		TypeCounterValue: {need: fbRequired | fbValue, allow: fbRequired | fbRequestID | fbValue, value: 'i'},
		TypeCacheOK:      {need: fbType | fbRequestID, allow: fbType | fbRequestID},
	}
)

// fastValues are the type-specific fields the fast path read.
type fastValues struct {
	bytes []byte
	num   int64
	ttl   *uint64
	delta int64
}

// fastValueField reads t when it is one of the type-specific fields shape allows; it
// returns the field's bit, or -1 when t is not one of them or holds a value the fast path
// leaves to encoding/json.
func fastValueField(t *fastTok, shape fastShape, v *fastValues) int {
	switch {
	case shape.allow&fbValue != 0 && string(t.key) == "value":
		switch {
		case shape.value == 'i' && t.kind == 'n':
			n, ok := fastInt(t.val)
			if !ok {
				return -1
			}
			v.num = n
		case shape.value == 'B' && t.kind == 'z':
			v.bytes = nil
		case shape.value != 'i' && t.kind == 's':
			b := make([]byte, base64.StdEncoding.DecodedLen(len(t.val)))
			n, err := base64.StdEncoding.Decode(b, t.val)
			if err != nil {
				return -1
			}
			v.bytes = b[:n]
		default:
			return -1
		}
		return fbValue
	case shape.allow&fbTTL != 0 && string(t.key) == "ttl_ms":
		switch t.kind {
		case 'z':
		case 'n':
			n, ok := fastUint(t.val)
			if !ok {
				return -1
			}
			v.ttl = &n
		default:
			return -1
		}
		return fbTTL
	case shape.allow&fbDelta != 0 && string(t.key) == "delta":
		n, ok := fastInt(t.val)
		if t.kind != 'n' || !ok {
			return -1
		}
		v.delta = n
		return fbDelta
	}
	return -1 // unknown, differently cased or misplaced key
}

// decodeMessageFast is DecodeMessage's fast path (see the top of this file); ok is false
// when the body must go through the slow path. body is valid UTF-8.
func decodeMessageFast(body []byte) (m Message, ok bool) {
	if m, ok, tried := decodeGroupFast(body); tried { // msgfast_group.go
		return m, ok
	}
	var f fastFields
	if !f.scan(body) {
		return nil, false
	}
	var typ []byte
	for i := range f.n {
		if string(f.toks[i].key) == "type" {
			if f.toks[i].kind != 's' {
				return nil, false
			}
			typ = f.toks[i].val
			break
		}
	}
	shape, known := fastShapes[MessageType(typ)]
	if !known {
		return nil, false
	}
	var k fastKey
	var v fastValues
	seen := 0
	for i := range f.n {
		t := &f.toks[i]
		bit := fastKeyField(t, &k)
		if bit == 0 {
			bit = fastValueField(t, shape, &v)
		}
		if bit < 0 || shape.allow&bit == 0 || seen&bit != 0 {
			return nil, false
		}
		seen |= bit
	}
	if seen&shape.need != shape.need {
		return nil, false
	}
	switch MessageType(typ) {
	case TypeCacheGet:
		return &CacheGet{TenantID: k.tenant, Namespace: k.namespace, Cache: k.cache, Key: k.key, RequestID: k.requestID}, true
	case TypeCacheDelete:
		return &CacheDelete{TenantID: k.tenant, Namespace: k.namespace, Cache: k.cache, Key: k.key, RequestID: k.requestID}, true
	case TypeCounterGet:
		return &CounterGet{TenantID: k.tenant, Namespace: k.namespace, Cache: k.cache, Key: k.key, RequestID: k.requestID}, true
	case TypeCachePut:
		return &CachePut{TenantID: k.tenant, Namespace: k.namespace, Cache: k.cache, Key: k.key, Value: v.bytes, RequestID: k.requestID, TTLMs: v.ttl}, true
	case TypeCounterAdd:
		return &CounterAdd{TenantID: k.tenant, Namespace: k.namespace, Cache: k.cache, Key: k.key, Delta: v.delta, RequestID: k.requestID}, true
	case TypeCacheValue:
		return &CacheValue{TenantID: k.tenant, Namespace: k.namespace, Cache: k.cache, Key: k.key, Value: v.bytes, RequestID: k.requestID}, true
	case TypeCacheDeleted:
		return &CacheDeleted{TenantID: k.tenant, Namespace: k.namespace, Cache: k.cache, Key: k.key, Value: v.bytes, RequestID: k.requestID}, true
	case TypeCounterValue:
		return &CounterValue{TenantID: k.tenant, Namespace: k.namespace, Cache: k.cache, Key: k.key, Value: v.num, RequestID: k.requestID}, true
	default: // cache_ok: request_id is required, so never null here
		if k.requestID == nil {
			return nil, false
		}
		return &CacheOK{RequestID: *k.requestID}, true
	}
}
