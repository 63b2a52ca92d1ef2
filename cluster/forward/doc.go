// Package forward holds the pure decisions of forwarding (issue 19; seeds/internal-protocol.txt,
// "Forwarded publish", "Authorization across a forward", "Forwarded cache operation",
// "Subscribe", "Acknowledging a forwarded publish", "Retrying a forwarded publish", "Chains are
// refused, not relayed", "Errors"; seeds/upgrades-and-compatibility.txt, "A note on
// credentialed forwards"):
//
//   - the owner's decision on a forward that reaches it (Decide): proceed, or the one answer
//     refusing it (NotLeader, StaleRoute, Unauthorized, Unavailable, Malformed) in the shape
//     of the request; the owner never forwards onward;
//   - the forwarder's retry machine for one client request (Machine): each attempt's
//     outcome in, the next step out (send to a broker at a generation after a backoff, ack,
//     fail, or indeterminate), with the attempt budget, loop refusal and the one legacy
//     fallback;
//   - the ingress decision (Ingress): serve locally, forward, or redirect the client; and
//     the builders of the forward messages from the routed shard (PublishMessage,
//     IdempotentPublishMessage, CacheMessage, AsKind).
//
// Pure: no goroutines, clocks, I/O or randomness (tidy_test.go). Time comes out as a
// Backoff duration the caller waits; credentials are verified through the CredentialCheck
// the caller passes (AuthCheck wraps an auth.Verifier). It imports cluster/transport only
// for its error sentinels and Refusal, and auth for Action, its sentinels and the Verifier
// interface; nothing here starts or reads either. docs/forwarding.md has the tables.
package forward
