// Package proto holds Felix's wire codecs: the FLX1 client protocol (12-byte header, JSON
// messages, binary publish/ack/event batches, capability flags; spec/client-protocol.md) and
// the FLXI broker-internal protocol (kinds, correlation ids, batch_checksum;
// seeds/internal-protocol.txt, spec/internal-protocol-kinds.md).
//
// The package is pure: no clocks, files, sockets or randomness. Framing over an io.Reader is
// the only I/O it performs.
//
// Zero-copy rule: every binary decoder returns names and payloads as sub-slices of the body it
// was given. They stay valid exactly as long as the caller leaves that buffer untouched; a
// caller that reuses its read buffer for the next frame must copy whatever it keeps. Encoders
// append to a caller's []byte and allocate nothing beyond the growth of that slice.
//
// Decision records for every PROPOSED point live in docs/client-protocol.md and
// docs/internal-protocol.md.
package proto
