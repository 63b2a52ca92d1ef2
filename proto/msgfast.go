package proto

import "encoding/base64"

// The fast path of DecodeMessage for the request messages a busy client sends per
// operation (cache_get, cache_put, cache_delete, counter_add, counter_get). It accepts only
// the plain form every SDK writes: one flat object, no escapes in keys or strings, integers
// without fraction or exponent, each key exactly a field's name and at most once, every
// required field present. Anything else (including every error case) reports false and
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

// decodeMessageFast is DecodeMessage's fast path (see the top of this file); ok is false
// when the body must go through the slow path. body is valid UTF-8.
func decodeMessageFast(body []byte) (m Message, ok bool) {
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
	var k fastKey
	var value []byte
	var ttl *uint64
	var delta int64
	seen := 0
	extra := 0 // the fields besides the shared ones this type takes
	switch string(typ) {
	case string(TypeCacheGet), string(TypeCacheDelete), string(TypeCounterGet):
	case string(TypeCachePut):
		extra = fbValue | fbTTL
	case string(TypeCounterAdd):
		extra = fbDelta
	default:
		return nil, false
	}
	for i := range f.n {
		t := &f.toks[i]
		bit := fastKeyField(t, &k)
		if bit == 0 {
			switch {
			case extra&fbValue != 0 && string(t.key) == "value":
				if t.kind != 's' {
					return nil, false
				}
				value = make([]byte, base64.StdEncoding.DecodedLen(len(t.val)))
				n, err := base64.StdEncoding.Decode(value, t.val)
				if err != nil {
					return nil, false
				}
				value, bit = value[:n], fbValue
			case extra&fbTTL != 0 && string(t.key) == "ttl_ms":
				if t.kind == 'n' {
					v, ok := fastUint(t.val)
					if !ok {
						return nil, false
					}
					ttl = &v
				} else if t.kind != 'z' {
					return nil, false
				}
				bit = fbTTL
			case extra&fbDelta != 0 && string(t.key) == "delta":
				v, ok := fastInt(t.val)
				if t.kind != 'n' || !ok {
					return nil, false
				}
				delta, bit = v, fbDelta
			default:
				return nil, false // unknown, differently cased or misplaced key
			}
		}
		if bit < 0 || seen&bit != 0 {
			return nil, false
		}
		seen |= bit
	}
	if seen&(fbRequired|extra) != fbRequired|extra {
		return nil, false
	}
	switch string(typ) {
	case string(TypeCacheGet):
		return &CacheGet{TenantID: k.tenant, Namespace: k.namespace, Cache: k.cache, Key: k.key, RequestID: k.requestID}, true
	case string(TypeCacheDelete):
		return &CacheDelete{TenantID: k.tenant, Namespace: k.namespace, Cache: k.cache, Key: k.key, RequestID: k.requestID}, true
	case string(TypeCounterGet):
		return &CounterGet{TenantID: k.tenant, Namespace: k.namespace, Cache: k.cache, Key: k.key, RequestID: k.requestID}, true
	case string(TypeCachePut):
		return &CachePut{TenantID: k.tenant, Namespace: k.namespace, Cache: k.cache, Key: k.key, Value: value, RequestID: k.requestID, TTLMs: ttl}, true
	default: // counter_add
		return &CounterAdd{TenantID: k.tenant, Namespace: k.namespace, Cache: k.cache, Key: k.key, Delta: delta, RequestID: k.requestID}, true
	}
}
