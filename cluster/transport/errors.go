package transport

import (
	"errors"
	"fmt"

	"felix/proto"

	"github.com/quic-go/quic-go"
)

// Errors of a request through the Pool. Test with errors.Is. Only ErrShed, ErrBackoff and
// ErrUnreachable are retryable (Retryable): nothing was sent. After ErrConnectionLost or
// ErrTimeout the peer may have applied the request (seed, "Retrying a forwarded publish").
var (
	// ErrShed: the peer already has Options.MaxInflightPerPeer requests in flight; nothing was sent.
	ErrShed = errors.New("transport: request shed (in-flight bound of the peer reached)")
	// ErrBackoff: the peer refused connections recently and its reconnect window has not
	// passed; the request failed without a dial.
	ErrBackoff = errors.New("transport: peer in reconnect backoff")
	// ErrUnreachable: the dial or the QUIC/TLS handshake failed; nothing was sent.
	ErrUnreachable = errors.New("transport: peer unreachable")
	// ErrConnectionLost: the connection closed while the request was outstanding; outcome unknown.
	ErrConnectionLost = errors.New("transport: connection lost with the request outstanding")
	// ErrTimeout: no answer within Options.RequestTimeout; outcome unknown.
	ErrTimeout = errors.New("transport: request timed out")
	// ErrWrongPeer: HelloOk named another node id than the one dialled (seed, "Handshake").
	ErrWrongPeer = errors.New("transport: peer answered with another node id")
	// ErrUnauthorized: the peer answered Hello with Error(Unauthorized).
	ErrUnauthorized = errors.New("transport: peer refused this node (Unauthorized)")
	// ErrProtocolVersion: the peer closed the connection with CodeProtocolVersion.
	ErrProtocolVersion = errors.New("transport: peer speaks another FLXI version")
	// ErrClosed: the Pool or Listener was closed.
	ErrClosed = errors.New("transport: closed")
	// ErrTooManyPeers: the Pool already holds Options.MaxPeers peers.
	ErrTooManyPeers = errors.New("transport: peer pool bound reached")
)

// Retryable reports whether a Request error means nothing was sent (ErrShed, ErrBackoff,
// ErrUnreachable), so the caller may retry as-is.
func Retryable(err error) bool {
	return errors.Is(err, ErrShed) || errors.Is(err, ErrBackoff) || errors.Is(err, ErrUnreachable)
}

// FrameError is a frame a peer sent that could not be used: a header that is not FLXI version
// 1 or is over the frame bound (Fatal true: the connection closes), or a body that does not
// decode (Fatal false: the stream is refused with Malformed and closed). Err wraps the
// proto.*FatalError or proto.*DecodeError (errors.Is works on proto's sentinels).
type FrameError struct {
	Peer  string     // node id of the peer (empty before Hello)
	Kind  proto.Kind // kind from the header (meaningless when Fatal)
	Fatal bool       // the header was bad: the connection closes (CloseCode)
	Err   error      // the *proto.FatalError or *proto.DecodeError
}

// Error describes the frame problem.
func (e *FrameError) Error() string {
	if e.Fatal {
		return fmt.Sprintf("transport: fatal frame from %q: %v", e.Peer, e.Err)
	}
	return fmt.Sprintf("transport: bad %v frame from %q: %v", e.Kind, e.Peer, e.Err)
}

// Unwrap returns the proto error.
func (e *FrameError) Unwrap() error { return e.Err }

// QUIC application error codes of internal connections (CONNECTION_CLOSE) and streams
// (RESET_STREAM / STOP_SENDING). They reuse the FLXI error code numbers (docs/internal-protocol.md §4).
const (
	// CodeNoError closes a connection or stream normally.
	CodeNoError quic.ApplicationErrorCode = 0
	// CodeUnauthorized: the Hello's node id does not match the peer's certificate (or is not a DNS name).
	CodeUnauthorized = quic.ApplicationErrorCode(proto.InternalUnauthorized)
	// CodeOverload: the listener is at Options.MaxConnections.
	CodeOverload = quic.ApplicationErrorCode(proto.InternalOverload)
	// CodeProtocolVersion: a frame carried another FLXI version; there is no frame to answer with.
	CodeProtocolVersion = quic.ApplicationErrorCode(proto.InternalProtocolVersion)
	// CodeMalformed: a frame that is not FLXI, is over the bound, or a Hello missing/invalid.
	CodeMalformed = quic.ApplicationErrorCode(proto.InternalMalformed)
	// StreamMalformed resets a stream whose frame body did not decode (after the typed refusal).
	StreamMalformed = quic.StreamErrorCode(proto.InternalMalformed)
)

// CloseCode is the connection close code for a frame read error: CodeProtocolVersion for
// another version, CodeMalformed for any other header problem (wrong magic, over the bound).
// Pure.
func CloseCode(err error) quic.ApplicationErrorCode {
	if errors.Is(err, proto.ErrUnsupportedVersion) {
		return CodeProtocolVersion
	}
	return CodeMalformed
}

// Refusal returns the answer refusing a request of kind with code, in the request's own
// shape (seed, "Correlation": a refusal is answered in the shape of the request): a forwarded
// publish gets ForwardPublishError, a cache op ForwardCacheError, a replication kind or Fence
// ReplicateError, anything else Error. Pure.
func Refusal(kind proto.Kind, corr uint64, code proto.InternalCode) proto.InternalMessage {
	switch kind {
	case proto.KindForwardPublish, proto.KindAuthorizedForwardPublish, proto.KindIdempotentForwardPublish:
		return &proto.ForwardPublishError{CorrelationID: corr, Code: code}
	case proto.KindForwardCacheOp, proto.KindAuthorizedForwardCacheOp:
		return &proto.ForwardCacheError{CorrelationID: corr, Code: code}
	case proto.KindReplicateRebuild, proto.KindFence, proto.KindFencePosition:
		return &proto.ReplicateError{CorrelationID: corr, Code: code}
	}
	for l := proto.LogStream; l <= proto.LogLast; l++ {
		if kind == l.RecordsKind() || kind == l.BootstrapKind() {
			return &proto.ReplicateError{CorrelationID: corr, Code: code}
		}
	}
	return &proto.InternalError{CorrelationID: corr, Code: code}
}
