// Package client is the Go SDK for Felix brokers (docs/client.md).
//
// Dial connects to a broker over QUIC (ALPN "felix/1"), authenticates with a token and
// negotiates capabilities (spec/client-protocol.md §4, §8.0). A Client keeps a pool of
// connections, each with a few authenticated request streams on which requests are
// pipelined and answers correlated by request_id; failed connections are redialled with
// jittered exponential backoff.
//
//   - Publishing: Client.NewPublisher batches records per stream (linger, record and byte
//     bounds), sends binary acked batches (0x0009) or JSON batches with offsets, bounds the
//     unacknowledged bytes, and returns a Pending future per record. An idempotent
//     Publisher re-sends a batch whose answer was lost; any other lost answer is
//     ErrIndeterminate, never re-sent (spec §8.10, seeds/internal-protocol.txt).
//   - Subscribing: Client.Subscribe delivers records with shard, offset, publisher and
//     gap counts, re-subscribing from the next offset after a lost connection and following
//     not_leader redirects (spec §7, §8.5, §8.9).
//   - Cache: Put, Get, Delete, CounterAdd, CounterGet and Watch (spec §6, §8.1, §8.2,
//     §8.4); Get, Delete and CounterGet are re-sent after an indeterminate outcome, Put and
//     CounterAdd never (seeds/internal-protocol.txt, "Forwarded cache operation").
//   - Consumer groups: Poll, Ack, Nack, DeadLetters, Redrive (spec §8.3).
//   - Admin: the broker's admin HTTP API for streams and caches (NewAdmin).
//
// Errors are typed: broker refusals are *ServerError (errors.Is ErrRefused and the
// sentinel of the wire code: ErrNotFound, ErrUnauthorized, ErrOverloaded, ...), lost
// answers ErrIndeterminate, redirects *NotLeaderError, unservable start offsets
// *CursorError.
package client
