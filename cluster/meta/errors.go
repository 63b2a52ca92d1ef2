package meta

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnreadableEntry is matched (errors.Is) by every *FatalError: a committed
// entry this build cannot apply. The member must log it and exit; it must not
// skip the entry (issue 17 item 2: no ignore bit).
var ErrUnreadableEntry = errors.New("meta: committed entry this build cannot read")

// FatalError is Apply's only error: the entry at Index has a kind or
// metadata level this build does not know, or a body it cannot decode
// strictly. Reason is "unknown kind", "unknown level", "level below the
// kind's minimum" or "malformed body".
type FatalError struct {
	Index  uint64
	Kind   Kind
	Level  Level
	Reason string
	Err    error
}

// Error names the index, kind, level and reason.
func (e *FatalError) Error() string {
	s := fmt.Sprintf("meta: entry %d (kind %d, level %d): %s", e.Index, e.Kind, e.Level, e.Reason)
	if e.Kind.Known() {
		s = fmt.Sprintf("meta: entry %d (kind %s, level %d): %s", e.Index, e.Kind, e.Level, e.Reason)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Reason == "unknown level" {
		s += fmt.Sprintf(" (this build reads metadata levels up to %d)", BuildMaxLevel)
	}
	return s
}

// Is matches ErrUnreadableEntry.
func (e *FatalError) Is(target error) bool { return target == ErrUnreadableEntry }

// Unwrap gives the decoding error, if any.
func (e *FatalError) Unwrap() error { return e.Err }

// HTTP statuses of refusals (net/http is I/O, so not imported here).
const (
	statusBadRequest  = 400
	statusNotFound    = 404
	statusConflict    = 409
	statusUnavailable = 503
)

// Refusal is a command the state refuses: Status is the HTTP status the REST
// layer answers (400, 404, 409, 503), Code a stable snake_case word, Message
// the operator-facing text. The state is unchanged.
type Refusal struct {
	Status  int
	Code    string
	Message string
}

// Error gives the message.
func (e *Refusal) Error() string { return e.Message }

// HTTPStatus gives Status.
func (e *Refusal) HTTPStatus() int { return e.Status }

func refuse(status int, code, format string, args ...any) *Refusal {
	return &Refusal{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) *Refusal {
	return refuse(statusBadRequest, "invalid", format, args...)
}

func notFound(format string, args ...any) *Refusal {
	return refuse(statusNotFound, "not_found", format, args...)
}

func conflict(code, format string, args ...any) *Refusal {
	return refuse(statusConflict, code, format, args...)
}

// PlacementError refuses a create whose replication factor exceeds the live
// brokers (issue 17 item 4): Need brokers were asked, Live are registered,
// live and not draining. HTTPStatus is 503 (brokers may come back).
type PlacementError struct {
	Need int
	Live int
}

// Error names both counts.
func (e *PlacementError) Error() string {
	return fmt.Sprintf("replication factor %d needs %d live brokers; %d are live", e.Need, e.Need, e.Live)
}

// HTTPStatus is 503.
func (e *PlacementError) HTTPStatus() int { return statusUnavailable }

// FinalizeError refuses a fleet-feature finalize (seed "Fleet features",
// "Runbook: rolling out a fleet feature"; HTTPStatus 409). Lacking names the
// live or draining brokers that do not report Feature; MissingPrerequisites
// the features that must be enabled first; LevelNeeded/LowMember/LowLevel a
// member below the feature's metadata level; Unknown a name no build knows.
type FinalizeError struct {
	Feature              string
	Unknown              bool
	Lacking              []string
	MissingPrerequisites []string
	LevelNeeded          Level
	LowMember            string
	LowLevel             Level
}

// Error names every reason, in the order prerequisites, level, brokers.
func (e *FinalizeError) Error() string {
	if e.Unknown {
		return fmt.Sprintf("unknown fleet feature %s", e.Feature)
	}
	var parts []string
	if len(e.MissingPrerequisites) > 0 {
		parts = append(parts, fmt.Sprintf("finalize %s first", strings.Join(e.MissingPrerequisites, ", ")))
	}
	if e.LowMember != "" {
		parts = append(parts, fmt.Sprintf("every control-plane member must be at metadata level %d; member %s is at %d",
			e.LevelNeeded, e.LowMember, e.LowLevel))
	}
	if len(e.Lacking) > 0 {
		parts = append(parts, fmt.Sprintf("broker(s) %s do not support it", strings.Join(e.Lacking, ", ")))
	}
	return fmt.Sprintf("cannot finalize fleet feature %s: %s", e.Feature, strings.Join(parts, "; "))
}

// HTTPStatus is 404 for an unknown feature, else 409.
func (e *FinalizeError) HTTPStatus() int {
	if e.Unknown {
		return statusNotFound
	}
	return statusConflict
}

// LevelError refuses a write needing metadata level Needed while Member
// reports only Reported (seed, metadata-version paragraphs; HTTPStatus 409).
// Unreported is set when the member has reported no level at all.
type LevelError struct {
	What       string
	Needed     Level
	Member     string
	Reported   Level
	Unreported bool
}

// Error names the write, both levels and the member.
func (e *LevelError) Error() string {
	if e.Unreported {
		return fmt.Sprintf("%s needs every control-plane member at metadata level %d; member %s reports no level",
			e.What, e.Needed, e.Member)
	}
	return fmt.Sprintf("%s needs every control-plane member at metadata level %d; member %s is at %d",
		e.What, e.Needed, e.Member, e.Reported)
}

// HTTPStatus is 409.
func (e *LevelError) HTTPStatus() int { return statusConflict }

// StatusOf gives the HTTP status of a refusal from this package (any error
// with an HTTPStatus method), 500 for anything else and 200 for nil.
func StatusOf(err error) int {
	if err == nil {
		return 200
	}
	var s interface{ HTTPStatus() int }
	if errors.As(err, &s) {
		return s.HTTPStatus()
	}
	return 500
}

// entryBelow refuses (409, code entry_level) a committed entry whose level is
// below what its effect needs: a proposer that did not know the rule.
func entryBelow(what string, needed, level Level) *Refusal {
	return conflict("entry_level", "%s needs an entry at metadata level %d; this one is at %d", what, needed, level)
}
