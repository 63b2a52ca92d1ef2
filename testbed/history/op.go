package history

import (
	"errors"
	"fmt"
	"time"
)

// Kind names what a client operation did. The values are the "kind" field of
// a history line; the package doc lists the Input and Output fields each uses.
type Kind string

// The operation kinds of a history.
const (
	KindPublish          Kind = "publish"            // append payloads to a stream
	KindSubscribeRead    Kind = "subscribe-read"     // one delivery (or several) of one subscription
	KindStreamRead       Kind = "stream-read"        // a point read of one offset of a stream shard
	KindCachePut         Kind = "cache-put"          // set a cache key's value
	KindCacheGet         Kind = "cache-get"          // read a cache key
	KindCacheDelete      Kind = "cache-delete"       // delete a cache key, answering the old value
	KindCounterAdd       Kind = "counter-add"        // add a delta to a counter, answering the new sum
	KindCounterGet       Kind = "counter-get"        // read a counter
	KindGroupPoll        Kind = "group-poll"         // lease records of a consumer group
	KindGroupAck         Kind = "group-ack"          // acknowledge leased offsets
	KindGroupNack        Kind = "group-nack"         // give leased offsets back for redelivery
	KindGroupDeadLetters Kind = "group-dead-letters" // list a group's dead letters
	KindCatalogCreate    Kind = "catalog-create"     // create a named catalog entry
	KindCatalogDelete    Kind = "catalog-delete"     // delete a named catalog entry
	KindCatalogGet       Kind = "catalog-get"        // look a named catalog entry up
	KindReplicaLog       Kind = "replica-log"        // one replica's log of one shard, dumped at the end
)

// Kinds lists every known Kind, in the order of the package doc.
var Kinds = []Kind{
	KindPublish, KindSubscribeRead, KindStreamRead, KindCachePut, KindCacheGet, KindCacheDelete,
	KindCounterAdd, KindCounterGet, KindGroupPoll, KindGroupAck, KindGroupNack, KindGroupDeadLetters,
	KindCatalogCreate, KindCatalogDelete, KindCatalogGet, KindReplicaLog,
}

// Outcome is what the client learned about an operation's effect.
type Outcome string

// The three outcomes.
const (
	// OK: a definite success; Output holds the answer.
	OK Outcome = "ok"
	// Fail: a definite failure; the operation certainly had no effect.
	Fail Outcome = "fail"
	// Info: indeterminate (timeout, lost connection, ErrIndeterminate): it
	// may or may not have taken effect, at any time after its invocation.
	Info Outcome = "info"
)

// Op is one client operation: one line of a history file.
//
// Times: InvokeNS/CompleteNS are monotonic nanoseconds since the recorder's
// start (0 <= InvokeNS <= CompleteNS); InvokeWall/CompleteWall the same
// instants as wall-clock times (UTC), for correlating with logs only.
// Index is unique in a history and assigned in invocation order; checkers
// name operations by it.
type Op struct {
	Index        int       `json:"index"`
	Process      int       `json:"process"`          // logical client (Jepsen's process), >= 0
	Client       string    `json:"client,omitempty"` // client or connection id, free-form
	Kind         Kind      `json:"kind"`
	InvokeNS     int64     `json:"invoke_ns"`
	CompleteNS   int64     `json:"complete_ns"`
	InvokeWall   time.Time `json:"invoke_wall"`
	CompleteWall time.Time `json:"complete_wall"`
	Outcome      Outcome   `json:"outcome"`
	Error        string    `json:"error,omitempty"` // the error text of a fail or info outcome
	In           Input     `json:"in"`
	Out          Output    `json:"out"`
}

// Input holds the arguments of an operation; each Kind uses some fields (the
// package doc has the table) and leaves the others zero.
type Input struct {
	Stream        string   `json:"stream,omitempty"`         // stream name (stream and group kinds)
	Shard         int      `json:"shard,omitempty"`          // shard read (subscribe-read, stream-read, group kinds, replica-log)
	Key           Bytes    `json:"key,omitempty"`            // routing key (publish) or cache/counter key
	Payloads      []Bytes  `json:"payloads,omitempty"`       // publish: the payloads, each a unique id within its stream
	Subscription  string   `json:"subscription,omitempty"`   // subscribe-read: the subscription's id, unique in the history
	From          *uint64  `json:"from,omitempty"`           // first offset asked for (subscribe-read), a group's start offset, a replica log's first offset
	Offset        uint64   `json:"offset,omitempty"`         // stream-read: the offset read
	Final         bool     `json:"final,omitempty"`          // a read of the final phase, after faults healed
	Cache         string   `json:"cache,omitempty"`          // cache name (cache and counter kinds)
	Value         Bytes    `json:"value,omitempty"`          // cache-put: the value
	TTLMillis     int64    `json:"ttl_ms,omitempty"`         // cache-put: TTL in milliseconds, 0 = none (not modelled)
	Delta         int64    `json:"delta,omitempty"`          // counter-add: the signed delta
	Group         string   `json:"group,omitempty"`          // consumer group name
	Consumer      string   `json:"consumer,omitempty"`       // consumer id within the group
	Offsets       []uint64 `json:"offsets,omitempty"`        // group-ack, group-nack: the offsets acked or nacked
	MaxDeliveries int      `json:"max_deliveries,omitempty"` // the group's max_deliveries, 0 = unknown
	Entry         string   `json:"entry,omitempty"`          // catalog kinds: the entry's name, e.g. "stream/orders"
	Spec          string   `json:"spec,omitempty"`           // catalog-create: the entry's spec, free-form
	Replica       string   `json:"replica,omitempty"`        // replica-log: the replica (node) id
}

// Output holds the answer of an OK operation (a Fail or Info one usually has
// none; records an Info read did deliver may still be listed).
type Output struct {
	Shard     int           `json:"shard,omitempty"`     // publish: the shard written
	Offsets   []uint64      `json:"offsets,omitempty"`   // publish: one offset per payload, in order
	Records   []Record      `json:"records,omitempty"`   // records read, in delivery order
	Skipped   []OffsetRange `json:"skipped,omitempty"`   // subscribe-read: offsets the broker flagged as skipped or dropped
	Found     bool          `json:"found,omitempty"`     // get/delete/stream-read: present; catalog-create: already existed
	Value     Bytes         `json:"value,omitempty"`     // cache-get/cache-delete: the (old) value; absent with found = empty
	Sum       int64         `json:"sum,omitempty"`       // counter-add: the new sum; counter-get: the sum
	Spec      string        `json:"spec,omitempty"`      // catalog-get: the entry's spec ("" = not compared)
	Committed uint64        `json:"committed,omitempty"` // replica-log: committed offsets are those < Committed
}

// Record is one record read: its offset, its payload and, for group polls and
// dead letters, how many times it had been delivered (this one included).
type Record struct {
	Offset     uint64 `json:"offset"`
	Payload    Bytes  `json:"payload"`
	Deliveries int    `json:"deliveries,omitempty"`
}

// OffsetRange is the half-open offset range [From, To).
type OffsetRange struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

// Contains reports whether From <= off < To.
func (r OffsetRange) Contains(off uint64) bool { return r.From <= off && off < r.To }

// ErrInvalid is wrapped by every Validate error: a well-formed line whose
// fields break the schema.
var ErrInvalid = errors.New("invalid history operation")

// Validate checks the schema rules of one operation: a known kind and
// outcome, 0 <= InvokeNS <= CompleteNS, non-negative index and process, the
// fields its kind requires, and for an OK publish one offset per payload.
// Errors wrap ErrInvalid and name the field.
func (op *Op) Validate() error {
	switch {
	case op.Index < 0:
		return fmt.Errorf("%w: index %d < 0", ErrInvalid, op.Index)
	case op.Process < 0:
		return fmt.Errorf("%w: process %d < 0", ErrInvalid, op.Process)
	case !knownKind(op.Kind):
		return fmt.Errorf("%w: unknown kind %q", ErrInvalid, op.Kind)
	case op.Outcome != OK && op.Outcome != Fail && op.Outcome != Info:
		return fmt.Errorf("%w: outcome %q is not ok, fail or info", ErrInvalid, op.Outcome)
	case op.InvokeNS < 0 || op.CompleteNS < op.InvokeNS:
		return fmt.Errorf("%w: times invoke_ns %d, complete_ns %d (need 0 <= invoke <= complete)",
			ErrInvalid, op.InvokeNS, op.CompleteNS)
	}
	if missing := op.missingField(); missing != "" {
		return fmt.Errorf("%w: %s needs in.%s", ErrInvalid, op.Kind, missing)
	}
	if op.Kind == KindPublish && op.Outcome == OK && len(op.Out.Offsets) != len(op.In.Payloads) {
		return fmt.Errorf("%w: ok publish has %d payloads but %d out.offsets",
			ErrInvalid, len(op.In.Payloads), len(op.Out.Offsets))
	}
	if op.Kind == KindReplicaLog && op.Outcome != OK {
		return fmt.Errorf("%w: replica-log outcome must be ok", ErrInvalid)
	}
	return nil
}

func knownKind(k Kind) bool {
	for _, known := range Kinds {
		if k == known {
			return true
		}
	}
	return false
}

// missingField names the first required Input field of op's kind that is
// empty, or returns "".
func (op *Op) missingField() string {
	in := &op.In
	switch op.Kind {
	case KindPublish:
		if len(in.Payloads) == 0 {
			return "payloads"
		}
		return emptyName("stream", in.Stream)
	case KindSubscribeRead:
		if in.Subscription == "" {
			return "subscription"
		}
		return emptyName("stream", in.Stream)
	case KindStreamRead:
		return emptyName("stream", in.Stream)
	case KindCachePut, KindCacheGet, KindCacheDelete, KindCounterAdd, KindCounterGet:
		return emptyName("cache", in.Cache)
	case KindGroupPoll, KindGroupAck, KindGroupNack, KindGroupDeadLetters:
		if in.Group == "" {
			return "group"
		}
		return emptyName("stream", in.Stream)
	case KindCatalogCreate, KindCatalogDelete, KindCatalogGet:
		return emptyName("entry", in.Entry)
	case KindReplicaLog:
		if in.Replica == "" {
			return "replica"
		}
		return emptyName("stream", in.Stream)
	}
	return ""
}

func emptyName(name, value string) string {
	if value == "" {
		return name
	}
	return ""
}
