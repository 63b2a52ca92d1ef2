package proto

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"
)

// jw appends a JSON object with keys in call order and no whitespace, matching the byte-exact
// vectors (spec/client-protocol.md §6): strings escaped like serde_json (", \, and control
// characters only), bytes as standard padded base64, integers in decimal.
type jw struct{ b []byte }

func newObject(dst []byte, typ MessageType) jw {
	w := jw{b: append(dst, '{')}
	w.b = append(w.b, `"type":`...)
	w.b = appendJSONString(w.b, string(typ))
	return w
}

func (w *jw) key(k string) {
	w.b = append(w.b, ',', '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *jw) str(k, v string)        { w.key(k); w.b = appendJSONString(w.b, v) }
func (w *jw) u64(k string, v uint64) { w.key(k); w.b = strconv.AppendUint(w.b, v, 10) }
func (w *jw) i64(k string, v int64)  { w.key(k); w.b = strconv.AppendInt(w.b, v, 10) }

func (w *jw) optStr(k, v string) {
	if v != "" {
		w.str(k, v)
	}
}

func (w *jw) optU64(k string, v *uint64) {
	if v != nil {
		w.u64(k, *v)
	}
}

func (w *jw) optU32(k string, v *uint32) {
	if v != nil {
		w.u64(k, uint64(*v))
	}
}

func (w *jw) optTrue(k string, v bool) {
	if v {
		w.key(k)
		w.b = append(w.b, "true"...)
	}
}

func (w *jw) bytes(k string, v []byte) { w.key(k); w.b = appendBase64(w.b, v) }

// optBytes writes k as base64 unless v is empty (an absent optional byte field).
func (w *jw) optBytes(k string, v []byte) {
	if len(v) > 0 {
		w.bytes(k, v)
	}
}

// nullBytes writes null for a nil slice and base64 otherwise (an empty non-nil slice is "").
func (w *jw) nullBytes(k string, v []byte) {
	w.key(k)
	if v == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = appendBase64(w.b, v)
}

func (w *jw) bytesList(k string, v [][]byte) {
	w.key(k)
	w.b = append(w.b, '[')
	for i, p := range v {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = appendBase64(w.b, p)
	}
	w.b = append(w.b, ']')
}

func (w *jw) strList(k string, v []string) {
	w.key(k)
	w.b = append(w.b, '[')
	for i, s := range v {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = appendJSONString(w.b, s)
	}
	w.b = append(w.b, ']')
}

func (w *jw) u64List(k string, v []uint64) {
	w.key(k)
	w.b = append(w.b, '[')
	for i, n := range v {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = strconv.AppendUint(w.b, n, 10)
	}
	w.b = append(w.b, ']')
}

func (w *jw) owner(k string, o Owner) {
	w.key(k)
	w.b = append(w.b, `{"node_id":`...)
	w.b = appendJSONString(w.b, o.NodeID)
	w.b = append(w.b, `,"address":`...)
	w.b = appendJSONString(w.b, o.Address)
	w.b = append(w.b, '}')
}

func (w *jw) end() []byte { return append(w.b, '}') }

func appendBase64(dst []byte, v []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, v)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted. Invalid UTF-8 bytes become U+FFFD so the output is
// always valid JSON that DecodeMessage accepts.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c >= 0x20:
				dst = append(dst, c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\uFFFD"...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

func appendUint(dst []byte, v uint64) []byte { return strconv.AppendUint(dst, v, 10) }
