package broker

import (
	"encoding/json"
	"errors"
	"slices"

	"felix/auth"
	"felix/core"
	"felix/core/cache"
	"felix/core/groups"
	"felix/proto"
)

// cacheRefusals are the core/cache errors that refuse a request by definition: the same
// request can never succeed, so they answer the non-retryable code malformed (out of range:
// counter overflow, TTL; too large: key, value; capacity: counter limit) with the cache's
// own text, e.g. "cache: counter overflow" (docs/client-protocol.md §4.3, D6).
var cacheRefusals = []error{
	cache.ErrCounterOverflow, cache.ErrNegativeTTL, cache.ErrZeroTTL, cache.ErrTTLTooLarge,
	cache.ErrEmptyKey, cache.ErrKeyTooLarge, cache.ErrValueTooLarge, cache.ErrCapacity,
}

// answerUndecodable answers a JSON frame that proto.DecodeMessage refused (an out-of-range
// number, a missing field, a bad enum) with code malformed, correlated when the request_id
// can still be read from the JSON: publish_error {request_id} for a publish or
// publish_batch, error {request_id} for anything else, plain error otherwise (docs/operations.md,
// "Client protocol as served"). Error path only: the lenient re-parse allocates.
func (s *session) answerUndecodable(body []byte, err error) {
	var head struct {
		Type      string  `json:"type"`
		RequestID *uint64 `json:"request_id"`
	}
	if json.Unmarshal(body, &head) != nil || head.RequestID == nil {
		s.sendError(proto.CodeMalformed, err.Error(), nil)
		return
	}
	if head.Type == "publish" || head.Type == "publish_batch" {
		s.answerPublishError(answerJSON, *head.RequestID, proto.CodeMalformed, err.Error())
		return
	}
	s.sendError(proto.CodeMalformed, err.Error(), head.RequestID)
}

// authFailureText is the message of a failed auth's error (code unauthorized): the v1 text
// ("auth required", "tenant mismatch"), followed for clients that list the error_codes
// feature by the verifier's fixed reason, e.g. "auth required: token expired" (a phrase
// naming the failed check, never a resource; docs/operations.md, "Client protocol").
func authFailureText(err error, features []string) string {
	text := auth.WireText(err)
	if text == "" {
		text = "unauthorized"
	}
	var te *auth.TokenError
	if errors.As(err, &te) && slices.Contains(features, proto.FeatureErrorCodes) {
		return te.Error()
	}
	return text
}

// errorCode maps an engine, cache, catalog or auth error to its wire code and v1-compatible
// text (spec/client-protocol.md §8.7). An error it does not know is logged and answered
// indeterminate (outcome unknown; not blindly retryable), never silently as a retryable
// code (docs/client-protocol.md §4.3).
func (srv *Server) errorCode(err error) (proto.ErrorCode, string) {
	if t := auth.WireText(err); t != "" {
		return proto.CodeUnauthorized, t
	}
	if fe, ok := isForwardError(err); ok { // a forward's end (forward.go): the Machine's client code
		return fe.Code, fe.Error()
	}
	switch {
	case errors.Is(err, core.ErrOverloaded), errors.Is(err, core.ErrSlowSubscriber), errors.Is(err, ErrLimit):
		return proto.CodeOverloaded, err.Error()
	case errors.Is(err, core.ErrNotFound), errors.Is(err, ErrNotFound):
		return proto.CodeNotFound, "not found"
	case errors.Is(err, core.ErrStorageFailed), errors.Is(err, cache.ErrCorruptRecord), errors.Is(err, groups.ErrCorrupt):
		return proto.CodeStorageFailed, storageFailedText(err) // ops.go: no server path
	case errors.Is(err, core.ErrInvalid), errors.Is(err, ErrInvalid), errors.Is(err, core.ErrNoDurableStorage),
		errors.Is(err, groups.ErrGroupIDCollision):
		return proto.CodeMalformed, err.Error()
	case errors.Is(err, core.ErrClosed):
		return proto.CodeShardUnavailable, "broker shutting down"
	case errors.Is(err, core.ErrNotHere):
		// The shard is not open (or not led) here now: refused before anything was stored
		// (spec §8.7 shard_unavailable; issue 19 answers not_leader with the owner instead).
		return proto.CodeShardUnavailable, err.Error()
	case errors.Is(err, core.ErrMoved):
		// The shard closed or changed role after the call was taken: its outcome is unknown.
		return proto.CodeIndeterminate, err.Error()
	case errors.Is(err, cache.ErrIndeterminate):
		return proto.CodeIndeterminate, err.Error()
	}
	for _, r := range cacheRefusals {
		if errors.Is(err, r) {
			return proto.CodeMalformed, err.Error()
		}
	}
	srv.m.unknownErrors.Inc()
	srv.log.Error("unclassified error answered indeterminate", "err", err)
	return proto.CodeIndeterminate, err.Error()
}
