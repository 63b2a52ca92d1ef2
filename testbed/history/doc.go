// Package history records what the clients of a cluster test bed run did and
// reads it back: the input of the checkers in felix/testbed/checker (issue
// 15, item 4). docs/cluster-testing.md ("History") carries the same schema.
//
// # File format
//
// A history is a file of JSON lines, one operation (Op) per line, written by
// a Recorder when the operation completes (lines are in completion order;
// "index" is the invocation order and names the operation in findings).
// Load reads one back, validating each line; a bad line is a *LineError
// naming it. Fields of every line:
//
//	index          int     unique, assigned at invocation, 0, 1, 2, ...
//	process        int     logical client (Jepsen's process), >= 0
//	client         string  client / connection id, free-form (optional)
//	kind           string  one of the kinds below
//	invoke_ns      int64   monotonic ns since the run start, at invocation
//	complete_ns    int64   monotonic ns since the run start, at completion (>= invoke_ns)
//	invoke_wall    string  RFC 3339 UTC wall time of the invocation (for logs only)
//	complete_wall  string  RFC 3339 UTC wall time of the completion
//	outcome        string  "ok" definite success; "fail" definite failure (no
//	                       effect); "info" indeterminate (may have happened)
//	error          string  the error text of a fail or info outcome (optional)
//	in             object  the arguments (below)
//	out            object  the answer of an ok operation (below)
//
// A byte string (payload, key, value) is a JSON string when it is valid
// UTF-8 and {"base64": "..."} otherwise (type Bytes). Refusals that are
// answers, such as "not found" or "already exists", are ok outcomes with
// out.found telling which; "fail" is reserved for operations that certainly
// did nothing (refused before being sent, or a definite error answer).
//
// # Kinds and their fields
//
//	kind               in                                     out (ok)
//	publish            stream, key?, payloads                 shard, offsets (one per payload)
//	subscribe-read     stream, shard, subscription, from?,    records, skipped (ranges the broker
//	                   final?                                 flagged: skipped_before, dropped)
//	stream-read        stream, shard, offset                  found, records (the one record)
//	cache-put          cache, key, value, ttl_ms?             -
//	cache-get          cache, key                             found, value
//	cache-delete       cache, key                             found, value? (the old value)
//	counter-add        cache, key, delta                      sum (the new sum)
//	counter-get        cache, key                             found, sum
//	group-poll         stream, shard, group, consumer,        records (with deliveries)
//	                   max_deliveries?, from?, final?
//	group-ack          stream, shard, group, consumer, offsets -
//	group-nack         stream, shard, group, consumer, offsets -
//	group-dead-letters stream, shard, group, max_deliveries?  records (with deliveries)
//	catalog-create     entry, spec?                           found (true: it already existed)
//	catalog-delete     entry                                  found (false: there was none)
//	catalog-get        entry                                  found, spec? ("" = not compared)
//	replica-log        stream, shard, replica, from?          committed, records (offsets < committed)
//
// Payloads are the workload's ids: unique within a stream, so a payload names
// its publish. Every subscription has its own "subscription" id; its
// subscribe-read operations are ordered by index. "final" marks reads of the
// final phase (faults healed, every record given time to arrive): the
// checkers report acked writes no final read saw only when such reads exist.
// Counters are a key space of their own (docs/cache.md): a counter-get of an
// absent counter answers found=false, which is distinct from a sum of 0.
// A cache-get with found=true and no value read an empty value. TTLs are
// recorded but not modelled: workloads use TTLs longer than the run.
// A replica-log line is recorded once per replica at the end of a run (an
// instantaneous ok operation): the replica's records of the shard up to the
// committed offset, for the replica divergence check.
package history
