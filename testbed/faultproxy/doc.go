// Package faultproxy is the UDP fault proxy of the cluster test bed: it sits between a QUIC client
// and a QUIC server (or any UDP peers) on loopback and injects network faults per direction.
//
// A Proxy listens on one UDP socket and forwards to one upstream address. Each client address gets
// its own upstream socket, so the server sees one distinct address per client and its replies are
// relayed back to the right client. The two directed links, ToServer (client→server) and ToClient
// (server→client), each carry their own Faults (delay with jitter, loss, duplication, reordering,
// a token-bucket rate cap, blackhole, a maximum datagram size and byte corruption), their own PRNG
// seeded from Config.Seed (so a run replays), and their own counters (LinkStats). Faults change at
// run time through Go methods (SetFaults, SetBlackhole, Reset) or the loopback-only HTTP control API
// (Handler, ServeControl); every change is logged with log/slog and kept in Changes.
//
// Delays run on one scheduler goroutine per link (a min-heap and one timer from the Clock seam);
// datagram buffers are pooled. Traffic goes only to 127.0.0.0/8 and ::1 unless
// Config.AllowNonLoopback says otherwise. RunCommand is the `felix-chaos proxy` command line.
//
// The fault model, its units and its limits: docs/cluster-testing.md, "Fault proxy".
package faultproxy
