package meta

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Kind is a log entry's command kind (the entry's first two bytes,
// big-endian). Numbers are never reused.
type Kind uint16

// The command kinds of this build.
const (
	KindCreateTenant      Kind = 1
	KindDeleteTenant      Kind = 2
	KindCreateNamespace   Kind = 3
	KindDeleteNamespace   Kind = 4
	KindCreateStream      Kind = 5
	KindDeleteStream      Kind = 6
	KindCreateCache       Kind = 7
	KindDeleteCache       Kind = 8
	KindRegisterBroker    Kind = 9
	KindHeartbeat         Kind = 10
	KindReplicaReport     Kind = 11
	KindSetAssignment     Kind = 12
	KindFinalizeFeature   Kind = 13
	KindMemberLevelReport Kind = 14
)

// Level is a metadata level (the seed's "metadata version"): what a member
// must understand to apply an entry. The entry's second two bytes.
type Level uint16

// BuildMaxLevel is the highest metadata level this build reads; an entry
// above it is a *FatalError. 14 covers storage identities (12), report stamps
// (13) and cache_incarnations (14); the consistency-change fence (19) is not
// built.
const BuildMaxLevel Level = 14

// The levels at which a command's fields take effect (seed, metadata-version
// paragraphs and "Storage identities during a roll").
const (
	LevelBase          Level = 1  // the catalog commands
	LevelFeatures      Level = 2  // a broker's features are kept; finalize
	LevelJumpHash      Level = 3  // jump_hash_routing and jump_hash streams
	LevelDeleteShards  Level = 10 // deletes take shard state; stream_incarnations
	LevelIdentities    Level = 12 // registrations store the storage identity
	LevelReportStamps  Level = 13 // replica reports are stamped
	LevelCacheIncarnat Level = 14 // cache_incarnations
)

// EntryHeaderLen is the length of [kind u16][level u16].
const EntryHeaderLen = 4

// Command is one state-machine command: its kind, the levels it needs and
// how it changes the state. Build one (CreateStream{...}) and give it to
// Propose; Apply decodes it again from the entry.
type Command interface {
	// Kind gives the command's kind.
	Kind() Kind
	// levels gives the level the entry must carry at least (required; a
	// group below it refuses the write, 409) and the highest level at which
	// the command still gains something (full), given the state.
	levels(s *State) (required, full Level)
	// apply changes tx; a *Refusal (or other typed error) leaves it unused.
	apply(tx *txn) (any, error)
}

// kindSpec is one registry row.
type kindSpec struct {
	name     string
	minLevel Level
	decode   func(body []byte) (Command, error)
}

var registry = map[Kind]kindSpec{
	KindCreateTenant:      {"create_tenant", LevelBase, decodeAs[CreateTenant]},
	KindDeleteTenant:      {"delete_tenant", LevelBase, decodeAs[DeleteTenant]},
	KindCreateNamespace:   {"create_namespace", LevelBase, decodeAs[CreateNamespace]},
	KindDeleteNamespace:   {"delete_namespace", LevelBase, decodeAs[DeleteNamespace]},
	KindCreateStream:      {"create_stream", LevelBase, decodeAs[CreateStream]},
	KindDeleteStream:      {"delete_stream", LevelBase, decodeAs[DeleteStream]},
	KindCreateCache:       {"create_cache", LevelBase, decodeAs[CreateCache]},
	KindDeleteCache:       {"delete_cache", LevelBase, decodeAs[DeleteCache]},
	KindRegisterBroker:    {"register_broker", LevelBase, decodeAs[RegisterBroker]},
	KindHeartbeat:         {"heartbeat", LevelBase, decodeAs[Heartbeat]},
	KindReplicaReport:     {"replica_report", LevelBase, decodeAs[ReplicaReport]},
	KindSetAssignment:     {"set_assignment", LevelBase, decodeAs[SetAssignment]},
	KindFinalizeFeature:   {"finalize_feature", LevelFeatures, decodeAs[FinalizeFeature]},
	KindMemberLevelReport: {"member_level_report", LevelBase, decodeAs[MemberLevelReport]},
}

// Known reports whether this build has the kind.
func (k Kind) Known() bool { _, ok := registry[k]; return ok }

// String gives the kind's registry name, or "kind(N)".
func (k Kind) String() string {
	if s, ok := registry[k]; ok {
		return s.name
	}
	return fmt.Sprintf("kind(%d)", uint16(k))
}

// MinLevel gives the lowest level an entry of the kind may carry (0 for an
// unknown kind).
func (k Kind) MinLevel() Level { return registry[k].minLevel }

// decodeAs decodes a strict JSON body (unknown fields and trailing data
// refused) into a T.
func decodeAs[T any, PT interface {
	*T
	Command
}](body []byte) (Command, error) {
	var v T
	if err := strictJSON(body, &v); err != nil {
		return nil, err
	}
	return PT(&v), nil
}

// strictJSON decodes exactly one JSON value into v, refusing unknown fields
// and anything after the value.
func strictJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the body")
	}
	return nil
}

// EncodeEntry gives the entry bytes of cmd at level: the 4-byte header and
// the JSON body. It refuses an unknown kind and a level outside
// [kind's minimum, BuildMaxLevel].
func EncodeEntry(cmd Command, level Level) ([]byte, error) {
	spec, ok := registry[cmd.Kind()]
	if !ok {
		return nil, fmt.Errorf("meta: unknown kind %d", cmd.Kind())
	}
	if level < spec.minLevel || level > BuildMaxLevel {
		return nil, fmt.Errorf("meta: %s at level %d: outside [%d, %d]", spec.name, level, spec.minLevel, BuildMaxLevel)
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	out := make([]byte, EntryHeaderLen, EntryHeaderLen+len(body))
	binary.BigEndian.PutUint16(out[0:2], uint16(cmd.Kind()))
	binary.BigEndian.PutUint16(out[2:4], uint16(level))
	return append(out, body...), nil
}

// DecodeEntry reads an entry's header and body. Every failure is a
// *FatalError carrying index: a short entry, an unknown kind, a level above
// BuildMaxLevel or below the kind's minimum, a body that does not decode
// strictly.
func DecodeEntry(index uint64, entry []byte) (Command, Level, error) {
	if len(entry) < EntryHeaderLen {
		return nil, 0, &FatalError{Index: index, Reason: "malformed body",
			Err: fmt.Errorf("entry of %d bytes is shorter than its %d-byte header", len(entry), EntryHeaderLen)}
	}
	kind := Kind(binary.BigEndian.Uint16(entry[0:2]))
	level := Level(binary.BigEndian.Uint16(entry[2:4]))
	fatal := func(reason string, err error) error {
		return &FatalError{Index: index, Kind: kind, Level: level, Reason: reason, Err: err}
	}
	spec, ok := registry[kind]
	switch {
	case !ok:
		return nil, level, fatal("unknown kind", nil)
	case level > BuildMaxLevel:
		return nil, level, fatal("unknown level", nil)
	case level < spec.minLevel:
		return nil, level, fatal("level below the kind's minimum", nil)
	}
	cmd, err := spec.decode(entry[EntryHeaderLen:])
	if err != nil {
		return nil, level, fatal("malformed body", err)
	}
	return cmd, level, nil
}
