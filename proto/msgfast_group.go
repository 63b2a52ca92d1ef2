package proto

import "bytes"

// The fast path of DecodeMessage for the two consumer-group requests a broker reads on
// every poll and ack (group_poll, group_ack) and the group_ok a client reads for each ack
// (issue 23 item 12: off encoding/json on the hot path). As for the cache messages (msgfast.go) it takes only the plain form the
// encoders here write: "type" first, one flat object, no escapes, each key exactly a
// field's name at most once, unsigned integers without fraction or exponent that fit
// their field, true/false, offsets as a flat array of such integers, every required
// field present and no other. Anything else reports tried=true, ok=false and DecodeMessage
// falls back to encoding/json, so the two paths never disagree (FuzzGroupFastMatchesJSON).

var (
	groupPollPrefix = []byte(`{"type":"group_poll"`)
	groupAckPrefix  = []byte(`{"type":"group_ack"`)
	groupOKPrefix   = []byte(`{"type":"group_ok"`)
)

// Bits of the group fields seen.
const (
	gfTenant = 1 << iota
	gfNamespace
	gfStream
	gfShard
	gfGroup
	gfMaxRecords
	gfMaxWait
	gfWithPublisher
	gfBinary
	gfOffsets
	gfRequestID
	gfCount
	gfTarget   = gfTenant | gfNamespace | gfStream | gfShard | gfGroup | gfRequestID
	gfPollNeed = gfTarget | gfMaxRecords | gfMaxWait
	gfPollAll  = gfPollNeed | gfWithPublisher | gfBinary
	gfAckNeed  = gfTarget | gfOffsets
	gfOKAll    = gfRequestID | gfCount
)

// groupFast holds the fields read.
type groupFast struct {
	tenant, namespace, stream, group string
	shard, maxRecords                uint32
	maxWait, requestID               uint64
	withPublisher, binary            bool
	offsets                          []uint64
	count                            *uint64
}

// decodeGroupFast decodes a plain group_poll or group_ack; tried is false when body is
// neither (the other fast path and the slow path take it).
func decodeGroupFast(body []byte) (m Message, ok, tried bool) {
	var need, allow int
	switch {
	case bytes.HasPrefix(body, groupPollPrefix):
		need, allow, body = gfPollNeed, gfPollAll, body[len(groupPollPrefix):]
	case bytes.HasPrefix(body, groupAckPrefix):
		need, allow, body = gfAckNeed, gfAckNeed, body[len(groupAckPrefix):]
	case bytes.HasPrefix(body, groupOKPrefix):
		need, allow, body = gfRequestID, gfOKAll, body[len(groupOKPrefix):]
	default:
		return nil, false, false
	}
	var g groupFast
	seen, ok := g.scan(body, allow)
	if !ok || seen&need != need {
		return nil, false, true
	}
	switch allow {
	case gfOKAll:
		return &GroupOK{RequestID: g.requestID, Count: g.count}, true, true
	case gfAckNeed:
		return &GroupAck{TenantID: g.tenant, Namespace: g.namespace, Stream: g.stream, Shard: g.shard, Group: g.group,
			Offsets: g.offsets, RequestID: g.requestID}, true, true
	}
	return &GroupPoll{TenantID: g.tenant, Namespace: g.namespace, Stream: g.stream, Shard: g.shard, Group: g.group,
		MaxRecords: g.maxRecords, MaxWaitMs: g.maxWait, WithPublisher: g.withPublisher, BinaryRecords: g.binary,
		RequestID: g.requestID}, true, true
}

// scan reads the fields after "type" (body starts right after its value) into g and
// returns the bits seen; false when body is not in the plain form or names a field
// allow does not hold.
func (g *groupFast) scan(body []byte, allow int) (int, bool) {
	seen, i := 0, 0
	for {
		i = skipWS(body, i)
		if i >= len(body) {
			return 0, false
		}
		if body[i] == '}' {
			return seen, skipWS(body, i+1) == len(body)
		}
		if body[i] != ',' {
			return 0, false
		}
		key, j, ok := scanPlainString(body, skipWS(body, i+1))
		if !ok {
			return 0, false
		}
		j = skipWS(body, j)
		if j >= len(body) || body[j] != ':' {
			return 0, false
		}
		bit, next := g.field(string(key), body, skipWS(body, j+1))
		if bit <= 0 || allow&bit == 0 || seen&bit != 0 {
			return 0, false
		}
		seen |= bit
		i = next
	}
}

// field reads the value at body[i] of the field key; it returns the field's bit and the
// index after the value, or bit <= 0 for an unknown key or a value not in the plain form.
func (g *groupFast) field(key string, body []byte, i int) (int, int) {
	switch key {
	case "tenant_id":
		return fastStr(body, i, &g.tenant, gfTenant)
	case "namespace":
		return fastStr(body, i, &g.namespace, gfNamespace)
	case "stream":
		return fastStr(body, i, &g.stream, gfStream)
	case "group":
		return fastStr(body, i, &g.group, gfGroup)
	case "shard":
		return fastU32(body, i, &g.shard, gfShard)
	case "max_records":
		return fastU32(body, i, &g.maxRecords, gfMaxRecords)
	case "max_wait_ms":
		return fastU64(body, i, &g.maxWait, gfMaxWait)
	case "request_id":
		return fastU64(body, i, &g.requestID, gfRequestID)
	case "with_publisher":
		return fastBool(body, i, &g.withPublisher, gfWithPublisher)
	case "binary_records":
		return fastBool(body, i, &g.binary, gfBinary)
	case "offsets":
		return g.fastOffsets(body, i)
	case "count":
		var v uint64
		bit, next := fastU64(body, i, &v, gfCount)
		if bit > 0 {
			g.count = &v
		}
		return bit, next
	}
	return 0, i
}

func fastStr(body []byte, i int, dst *string, bit int) (int, int) {
	v, next, ok := scanPlainString(body, i)
	if !ok {
		return -1, i
	}
	*dst = string(v)
	return bit, next
}

func fastU64(body []byte, i int, dst *uint64, bit int) (int, int) {
	if i >= len(body) || body[i] < '0' || body[i] > '9' {
		return -1, i
	}
	lit, next, ok := scanPlainInt(body, i)
	if !ok {
		return -1, i
	}
	if *dst, ok = fastUint(lit); !ok {
		return -1, i
	}
	return bit, next
}

func fastU32(body []byte, i int, dst *uint32, bit int) (int, int) {
	var v uint64
	b, next := fastU64(body, i, &v, bit)
	if b <= 0 || v > 1<<32-1 {
		return -1, i
	}
	*dst = uint32(v)
	return b, next
}

func fastBool(body []byte, i int, dst *bool, bit int) (int, int) {
	switch {
	case bytes.HasPrefix(body[i:], []byte("true")):
		*dst = true
		return bit, i + 4
	case bytes.HasPrefix(body[i:], []byte("false")):
		*dst = false
		return bit, i + 5
	}
	return -1, i
}

// fastOffsets reads a flat array of plain unsigned integers ([] gives an empty, non-nil
// slice, as encoding/json does).
func (g *groupFast) fastOffsets(body []byte, i int) (int, int) {
	if i >= len(body) || body[i] != '[' {
		return -1, i
	}
	g.offsets = make([]uint64, 0, bytes.Count(body[i:], []byte(","))+1)
	i = skipWS(body, i+1)
	if i < len(body) && body[i] == ']' {
		return gfOffsets, i + 1
	}
	for {
		var v uint64
		b, next := fastU64(body, i, &v, gfOffsets)
		if b <= 0 {
			return -1, i
		}
		g.offsets = append(g.offsets, v)
		i = skipWS(body, next)
		if i >= len(body) {
			return -1, i
		}
		switch body[i] {
		case ']':
			return gfOffsets, i + 1
		case ',':
			i = skipWS(body, i+1)
		default:
			return -1, i
		}
	}
}
