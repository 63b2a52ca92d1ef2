package client

import (
	"errors"
	"fmt"
	"strings"

	"felix/proto"
)

// Sentinel errors. Every error the SDK returns for a broker refusal or a transport failure
// matches one of them with errors.Is. Wire codes follow spec/client-protocol.md §8.7
// (docs/client-protocol.md §4.3); v1 brokers that send no code are classified by their text.
var (
	// ErrNotFound: the tenant, namespace, stream, cache or group does not exist (not_found).
	ErrNotFound = errors.New("felix: not found")
	// ErrUnauthorized: the token is invalid, missing a permission or for another tenant
	// (unauthorized; v1 texts "auth required", "forbidden", "tenant mismatch").
	ErrUnauthorized = errors.New("felix: unauthorized")
	// ErrIndeterminate: the request was sent but its answer was lost (connection or stream
	// ended, context ended while waiting, or the broker answered indeterminate). The
	// operation may or may not have been applied.
	ErrIndeterminate = errors.New("felix: outcome indeterminate")
	// ErrOverloaded: the broker shed the request (queue full, byte budget); nothing was
	// applied. Retry after a backoff.
	ErrOverloaded = errors.New("felix: broker overloaded")
	// ErrNotLeader: the shard is owned by another broker; see *NotLeaderError for the owner.
	ErrNotLeader = errors.New("felix: not leader")
	// ErrLeadershipLost: the broker's replicas no longer confirm it as leader (retryable
	// after re-routing).
	ErrLeadershipLost = errors.New("felix: leadership lost")
	// ErrShardUnavailable: no broker can serve the shard now (retryable with backoff).
	ErrShardUnavailable = errors.New("felix: shard unavailable")
	// ErrMalformed: the broker could not decode the request; retrying will not help.
	ErrMalformed = errors.New("felix: malformed request")
	// ErrStorageFailed: the owner's disk failed; the request was not applied.
	ErrStorageFailed = errors.New("felix: storage failed")
	// ErrRefused matches every definite refusal by the broker (any *ServerError): the
	// request was not applied.
	ErrRefused = errors.New("felix: refused")
	// ErrCursor matches *CursorError (subscribe start offset too old or in the future).
	ErrCursor = errors.New("felix: cursor out of range")
	// ErrUnsupported: the broker did not negotiate a capability the call needs (a flag bit
	// of spec §3 or a feature of §8.0).
	ErrUnsupported = errors.New("felix: not supported by the broker")
	// ErrClosed: the Client, Publisher, Subscription or Watch was closed.
	ErrClosed = errors.New("felix: closed")
	// ErrInvalidArgument: a call's argument is out of range (empty name, oversize value, ...).
	ErrInvalidArgument = errors.New("felix: invalid argument")
	// ErrTooLarge: a cache key or value is longer than the broker accepts (MaxCacheKeyBytes,
	// MaxCacheValueBytes). The SDK checks before sending, so the request was never sent and
	// nothing was applied. It also matches ErrInvalidArgument.
	ErrTooLarge = fmt.Errorf("%w: too large", ErrInvalidArgument)
	// ErrProtocol: the broker sent something this SDK cannot decode or did not expect.
	ErrProtocol = errors.New("felix: protocol violation by the broker")
)

// ServerError is an error answer from the broker: an error or publish_error message, or
// a binary error ack (spec §6, §5.3, §8.7). errors.Is matches the sentinel of Code
// (ErrOverloaded for "overloaded", ...) and, for every code but "indeterminate", ErrRefused:
// a definite refusal, nothing applied. Code "indeterminate" (a forward whose answer was lost,
// an error the broker could not classify) matches ErrIndeterminate only: the request may have
// been applied, so a caller that re-sent it as new on ErrRefused would apply it twice.
type ServerError struct {
	Code    proto.ErrorCode // "" when the broker sent none (v1); then classified by Message
	Message string
}

// Error formats the code and the broker's message.
func (e *ServerError) Error() string {
	if e.Code == "" {
		return "felix: broker refused: " + e.Message
	}
	return fmt.Sprintf("felix: broker refused (%s): %s", e.Code, e.Message)
}

// Is matches ErrRefused and the sentinel of the error code.
func (e *ServerError) Is(target error) bool {
	if target == ErrRefused {
		return e.Code != proto.CodeIndeterminate
	}
	s := sentinelFor(e.Code, e.Message)
	return s != nil && s == target
}

// sentinelFor maps a wire code (or, for a v1 broker without codes, the message text) to
// its sentinel; nil when unknown.
func sentinelFor(code proto.ErrorCode, message string) error {
	switch code {
	case proto.CodeNotFound:
		return ErrNotFound
	case proto.CodeUnauthorized:
		return ErrUnauthorized
	case proto.CodeIndeterminate:
		return ErrIndeterminate
	case proto.CodeOverloaded:
		return ErrOverloaded
	case proto.CodeNotLeader:
		return ErrNotLeader
	case proto.CodeLeadershipLost:
		return ErrLeadershipLost
	case proto.CodeShardUnavailable:
		return ErrShardUnavailable
	case proto.CodeMalformed:
		return ErrMalformed
	case proto.CodeStorageFailed:
		return ErrStorageFailed
	case "":
		switch m := strings.ToLower(message); {
		case m == "auth required", m == "forbidden", m == "tenant mismatch", m == "auth already established", m == "unauthorized":
			return ErrUnauthorized
		case strings.Contains(m, "not found"):
			return ErrNotFound
		case strings.HasPrefix(m, "missing request_id"):
			return ErrMalformed
		}
	}
	return nil
}

// serverError builds the error for a refusal; an "indeterminate" code is returned as
// ErrIndeterminate-matching too (through ServerError.Is).
func serverError(code proto.ErrorCode, message string) error {
	return &ServerError{Code: code, Message: message}
}

// NotLeaderError redirects a request to the shard's owner (spec §8.9). errors.Is matches
// ErrNotLeader.
type NotLeaderError struct {
	Stream     string
	Shard      uint32
	Owner      string // owner's node id
	Address    string // owner's advertised client address (host:port)
	Generation uint64
}

// Error names the stream, shard and owner.
func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("felix: not leader for %s shard %d: owner %s at %s (generation %d)", e.Stream, e.Shard, e.Owner, e.Address, e.Generation)
}

// Is matches ErrNotLeader.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// CursorReason says why a subscribe start offset cannot be served (spec §7).
type CursorReason string

// Cursor error reasons (spec §7, proto.CursorTooOld / proto.CursorInFuture).
const (
	CursorTooOld   CursorReason = "too_old"   // retention discarded it; Available = oldest retained
	CursorInFuture CursorReason = "in_future" // past the end; Available = current tail
)

// CursorError refuses a subscribe start offset (subscribe_cursor_error, spec §7). It is
// never a silent restart at the tail. errors.Is matches ErrCursor.
type CursorError struct {
	Stream    string
	Shard     uint32
	Reason    CursorReason
	Requested uint64
	Available uint64
}

// Error names the stream, shard, offsets and reason.
func (e *CursorError) Error() string {
	return fmt.Sprintf("felix: subscribe %s shard %d at offset %d: %s (available %d)", e.Stream, e.Shard, e.Requested, e.Reason, e.Available)
}

// Is matches ErrCursor.
func (e *CursorError) Is(target error) bool { return target == ErrCursor }

// indeterminate wraps cause so that errors.Is matches both ErrIndeterminate and cause.
func indeterminate(cause error) error {
	if cause == nil || errors.Is(cause, ErrIndeterminate) {
		if cause == nil {
			return ErrIndeterminate
		}
		return cause
	}
	return fmt.Errorf("%w: %w", ErrIndeterminate, cause)
}
