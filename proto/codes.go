package proto

import "strings"

// ErrorCode is the client-visible "code" of error / publish_error, and the prefix of a
// binary 0x0010 error text "<code>: <detail>" (spec/client-protocol.md §8.7). Decoders accept
// any string so a newer broker's codes pass through.
type ErrorCode string

// Client-visible error codes (§8.7).
const (
	CodeLeadershipLost   ErrorCode = "leadership_lost"   // retry after re-routing
	CodeShardUnavailable ErrorCode = "shard_unavailable" // retry with backoff
	CodeNotLeader        ErrorCode = "not_leader"        // retry at the named owner
	CodeIndeterminate    ErrorCode = "indeterminate"     // outcome unknown; idempotent retry
	CodeOverloaded       ErrorCode = "overloaded"        // retry with backoff
	CodeUnauthorized     ErrorCode = "unauthorized"      // do not retry
	CodeNotFound         ErrorCode = "not_found"         // do not retry
	CodeMalformed        ErrorCode = "malformed"         // do not retry
	CodeStorageFailed    ErrorCode = "storage_failed"    // do not retry
)

// Retryable reports whether a client may retry after this code (§8.7 table);
// indeterminate is retryable only with an idempotent producer, so it reports false.
func (c ErrorCode) Retryable() bool {
	switch c {
	case CodeLeadershipLost, CodeShardUnavailable, CodeNotLeader, CodeOverloaded:
		return true
	}
	return false
}

// ErrorText formats a binary publish-ack error text: "<code>: <detail>" (§8.7).
func ErrorText(code ErrorCode, detail string) string {
	return string(code) + ": " + detail
}

// SplitErrorText splits a binary ack error text into code and detail when it has the form
// "<code>: <detail>" with a known-shaped code (lowercase letters and '_'); otherwise it
// returns "" and the whole text (a v1 broker's plain message).
func SplitErrorText(text string) (ErrorCode, string) {
	i := strings.Index(text, ": ")
	if i <= 0 {
		return "", text
	}
	for _, c := range text[:i] {
		if (c < 'a' || c > 'z') && c != '_' {
			return "", text
		}
	}
	return ErrorCode(text[:i]), text[i+2:]
}
