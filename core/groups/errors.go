package groups

import (
	"errors"
	"fmt"
	"strings"
)

// Errors returned by Shard and Replayer methods. All are errors.Is-able; per-offset
// refusals arrive wrapped in an *OffsetsError. docs/groups.md, "Errors".
var (
	// ErrUnknownGroup: the group has never been created on this shard (Ack, Nack,
	// DeadLetters, Redrive). Poll creates a group on first use.
	ErrUnknownGroup = errors.New("groups: unknown group")
	// ErrLeaseExpired: the caller's lease on the offset ended (deadline passed, or the
	// offset was leased again since); the ack or nack is refused and changes nothing.
	ErrLeaseExpired = errors.New("groups: lease expired")
	// ErrNotLeased: the offset is not leased to this consumer (never delivered, or held
	// by another consumer under a lease the caller never had).
	ErrNotLeased = errors.New("groups: offset not leased to this consumer")
	// ErrNotDead: Redrive named an offset that is not a dead letter of the group.
	ErrNotDead = errors.New("groups: offset is not a dead letter")
	// ErrInvalidGroupName: the group name is empty or longer than MaxGroupNameBytes.
	ErrInvalidGroupName = errors.New("groups: invalid group name")
	// ErrInvalidRequest: a numeric argument is out of its documented bounds.
	ErrInvalidRequest = errors.New("groups: invalid request")
	// ErrGroupIDCollision: two different group names hash to the same 64-bit group id.
	ErrGroupIDCollision = errors.New("groups: group id collision")
	// ErrCorrupt: a cursor or dead-letter log record does not decode (wrapped by *RecordError).
	ErrCorrupt = errors.New("groups: corrupt log record")
)

// Refusal is one offset an Ack, Nack or Redrive refused, with the reason (one of the
// sentinel errors above).
type Refusal struct {
	Offset uint64
	Err    error
}

// OffsetsError reports the offsets of a batch that were refused; the other offsets of
// the same call were applied. errors.Is(err, ErrLeaseExpired) holds when any refusal
// has that reason.
type OffsetsError struct {
	Refused []Refusal
}

// Error lists up to four refused offsets.
func (e *OffsetsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "groups: %d offset(s) refused:", len(e.Refused))
	for i, r := range e.Refused {
		if i == 4 {
			b.WriteString(" ...")
			break
		}
		fmt.Fprintf(&b, " %d (%v)", r.Offset, r.Err)
	}
	return b.String()
}

// Is reports whether any refusal carries target.
func (e *OffsetsError) Is(target error) bool {
	for _, r := range e.Refused {
		if errors.Is(r.Err, target) {
			return true
		}
	}
	return false
}

// RecordError names the log and the problem of a record that failed to decode.
// It unwraps to ErrCorrupt.
type RecordError struct {
	Log    string // "cursor" or "dead-letter"
	Detail string
}

// Error describes the corrupt record.
func (e *RecordError) Error() string {
	return "groups: corrupt " + e.Log + " record: " + e.Detail
}

// Unwrap returns ErrCorrupt.
func (e *RecordError) Unwrap() error { return ErrCorrupt }
