// Package netq is Felix's client-role QUIC transport on quic-go: the listener with per-hello
// ALPN selection (none or "felix/1"; never "felix-internal/1"), TLS material (loaded from
// FELIX_TLS_CERT/FELIX_TLS_KEY or a self-signed development certificate whose Fingerprint
// is logged), bounds that fail cleanly (connections, streams per connection, in-flight bytes
// per connection via ByteBudget, queued answer bytes per stream via Writer), and the
// flow-control and socket tuning recorded in docs/bench/netq.md.
//
// Spec: spec/client-protocol.md §1 (transport, stream roles), spec/auth.md §6 (ALPN of the
// internal role), design/NOTES.md "QUIC with quic-go".
//
// netq moves bytes; it knows nothing of auth, streams or caches. Frames are read with
// proto.ReadFrame; the broker package owns the protocol handlers.
package netq
