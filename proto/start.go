package proto

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// StartKind selects where a subscription starts (spec/client-protocol.md §7).
type StartKind uint8

// Start kinds.
const (
	StartLatest   StartKind = iota // "latest" (same as absent)
	StartEarliest                  // "earliest"
	StartOffset                    // {"offset": n}
)

// Start is subscribe.start: "latest", "earliest" or {"offset": n} (§7).
type Start struct {
	Kind   StartKind
	Offset uint64 // only for StartOffset: the first offset not yet seen
}

func (s Start) appendJSON(dst []byte) []byte {
	switch s.Kind {
	case StartEarliest:
		return append(dst, `"earliest"`...)
	case StartOffset:
		dst = append(dst, `{"offset":`...)
		dst = strconv.AppendUint(dst, s.Offset, 10)
		return append(dst, '}')
	default:
		return append(dst, `"latest"`...)
	}
}

// MarshalJSON encodes the start position.
func (s Start) MarshalJSON() ([]byte, error) { return s.appendJSON(nil), nil }

// UnmarshalJSON accepts "latest", "earliest" or an object with a u64 "offset"; anything else
// is ErrMalformed.
func (s *Start) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch string(b) {
	case `"latest"`:
		*s = Start{Kind: StartLatest}
		return nil
	case `"earliest"`:
		*s = Start{Kind: StartEarliest}
		return nil
	}
	var o struct {
		Offset *uint64 `json:"offset"`
	}
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &o) != nil || o.Offset == nil {
		return decodeErr("start", 0, ErrMalformed)
	}
	*s = Start{Kind: StartOffset, Offset: *o.Offset}
	return nil
}
