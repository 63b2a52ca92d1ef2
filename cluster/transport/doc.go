// Package transport is the broker-internal QUIC transport (seeds/internal-protocol.txt, "The
// transport", "Handshake", "Versioning", "Correlation", "Limits and validation"): a listener
// and a pooled dialler that negotiate only the ALPN "felix-internal/1" (netq.ALPNInternal),
// speak FLXI frames through proto's codec, open every connection with Hello/HelloOk, and
// match answers to requests by the correlation id that begins every body.
//
// Peer identity (tls.go): with FELIX_INTERNAL_TLS_CERT, _KEY and _CA all set, both ends
// present certificates chaining to the CA; the dialler checks the listener's DNS name against
// the node id it dialled, and the listener checks the node id claimed in Hello against the
// certificate the peer presented (Unauthorized and a closed connection on a mismatch).
// Without them the link is encrypted with self-signed certificates and any peer is accepted.
//
// The pure decisions (node-id validity, the refusal shape of a kind, the backoff schedule,
// the connection close code of a bad frame) are plain functions tested without I/O; the
// listener and the Pool do the I/O. docs/internal-transport.md records the decisions.
package transport
