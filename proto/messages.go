package proto

// MessageType is the "type" tag of a JSON message (spec/client-protocol.md §6, §8).
type MessageType string

// Message types. v1 (§6) first, then the §8 extensions.
const (
	TypeAuth                 MessageType = "auth"
	TypeAuthOK               MessageType = "auth_ok"
	TypePublish              MessageType = "publish"
	TypePublishBatch         MessageType = "publish_batch"
	TypePublishOK            MessageType = "publish_ok"
	TypePublishError         MessageType = "publish_error"
	TypeSubscribe            MessageType = "subscribe"
	TypeSubscribed           MessageType = "subscribed"
	TypeSubscribeCursorError MessageType = "subscribe_cursor_error"
	TypeEventStreamHello     MessageType = "event_stream_hello"
	TypeEvent                MessageType = "event"
	TypeEventBatch           MessageType = "event_batch"
	TypeCachePut             MessageType = "cache_put"
	TypeCacheGet             MessageType = "cache_get"
	TypeCacheValue           MessageType = "cache_value"
	TypeCacheOK              MessageType = "cache_ok"
	TypeOK                   MessageType = "ok"
	TypeError                MessageType = "error"

	TypeCacheDelete        MessageType = "cache_delete"
	TypeCacheDeleted       MessageType = "cache_deleted"
	TypeCounterAdd         MessageType = "counter_add"
	TypeCounterGet         MessageType = "counter_get"
	TypeCounterValue       MessageType = "counter_value"
	TypeGroupPoll          MessageType = "group_poll"
	TypeGroupRecords       MessageType = "group_records"
	TypeGroupAck           MessageType = "group_ack"
	TypeGroupNack          MessageType = "group_nack"
	TypeGroupOK            MessageType = "group_ok"
	TypeDeadLettersList    MessageType = "dead_letters_list"
	TypeDeadLetters        MessageType = "dead_letters"
	TypeDeadLettersRedrive MessageType = "dead_letters_redrive"
	TypeCacheWatch         MessageType = "cache_watch"
	TypeCacheWatching      MessageType = "cache_watching"
	TypeCacheChange        MessageType = "cache_change"
	TypeCacheUnwatch       MessageType = "cache_unwatch"
	TypeNotLeader          MessageType = "not_leader"
	TypeRouteLookup        MessageType = "route_lookup"
	TypeRoute              MessageType = "route"
)

// Feature names for auth.features / auth_ok.features (§8.0). A broker sends a feature's
// messages only to a client that listed it.
const (
	FeatureCacheDelete       = "cache_delete"
	FeatureCounters          = "counters"
	FeatureGroups            = "groups"
	FeatureCacheWatch        = "cache_watch"
	FeatureIdempotentPublish = "idempotent_publish"
	FeatureRedirects         = "redirects"
	FeatureErrorCodes        = "error_codes"
	FeaturePublishers        = "publishers"
	// FeatureRoutingKeys: publish/publish_batch carry "key", publish_ok carries "shard", and
	// binary publishes may set FlagPublishKeyed (docs/client-protocol.md D15).
	FeatureRoutingKeys = "routing_keys"
)

// Message is one decoded or to-be-encoded JSON message. Concrete types are the pointer
// types below (*Auth, *Publish, ...); type-switch on them after DecodeMessage.
type Message interface {
	// Type returns the "type" tag.
	Type() MessageType
	// AppendJSON appends the JSON body (no frame header): keys in wire order, no whitespace,
	// optional fields omitted when absent.
	AppendJSON(dst []byte) []byte
}

// AppendMessage appends a whole FLX1 frame (header with flags 0, then the JSON body of m).
func AppendMessage(dst []byte, m Message) []byte {
	out, start := beginFrame(dst, 0)
	out = m.AppendJSON(out)
	return endFrame(out, start)
}

// Ptr returns a pointer to v; a convenience for optional fields.
func Ptr[T any](v T) *T { return &v }

// JSONAck is the "ack" field of publish/publish_batch. Absent ("") means per_message.
type JSONAck string

// Ack values of JSON publishes.
const (
	JSONAckNone       JSONAck = "none"
	JSONAckPerMessage JSONAck = "per_message"
	JSONAckPerBatch   JSONAck = "per_batch"
)

// Auth opens every client stream (§6, §4, §8.0). ClientFlags nil = legacy client (answer
// "ok"); Features lists JSON-only features.
type Auth struct {
	TenantID    string   `json:"tenant_id"`
	Token       string   `json:"token"`
	ClientFlags *uint16  `json:"client_flags"`
	Features    []string `json:"features"`
}

// AuthOK answers an auth that offered client_flags (§4, §8.0).
type AuthOK struct {
	ServerFlags uint16   `json:"server_flags"`
	Features    []string `json:"features"`
}

// Publish is a single-payload publish (§6, §8.10). Ack "" = absent (per_message).
// Idempotent requires ProducerID and RequestID. Key is the routing key (base64, 1..MaxKeyLen
// bytes; nil = absent, the broker picks the shard; docs/client-protocol.md D15).
type Publish struct {
	TenantID   string  `json:"tenant_id"`
	Namespace  string  `json:"namespace"`
	Stream     string  `json:"stream"`
	Key        []byte  `json:"key"`
	Payload    []byte  `json:"payload"`
	RequestID  *uint64 `json:"request_id"`
	Ack        JSONAck `json:"ack"`
	ProducerID string  `json:"producer_id"`
	Idempotent bool    `json:"idempotent"`
}

// JSONPublishBatch is the JSON publish_batch (§6, §8.10); one ack for the whole batch. Key
// routes the whole batch, as on Publish (D15).
type JSONPublishBatch struct {
	TenantID   string   `json:"tenant_id"`
	Namespace  string   `json:"namespace"`
	Stream     string   `json:"stream"`
	Key        []byte   `json:"key"`
	Payloads   [][]byte `json:"payloads"`
	RequestID  *uint64  `json:"request_id"`
	Ack        JSONAck  `json:"ack"`
	ProducerID string   `json:"producer_id"`
	Idempotent bool     `json:"idempotent"`
}

// PublishOK acknowledges a publish (§6, §8.10). Offsets are present when known; Duplicate
// marks an idempotent retry answered with the original result; Shard (nil = absent) is the
// shard that stored the batch, sent to clients that negotiated routing_keys (D15).
type PublishOK struct {
	RequestID   uint64  `json:"request_id"`
	FirstOffset *uint64 `json:"first_offset"`
	LastOffset  *uint64 `json:"last_offset"`
	Duplicate   bool    `json:"duplicate"`
	Shard       *uint32 `json:"shard"`
}

// PublishError refuses an acked publish (§6, §8.7). Code "" = absent.
type PublishError struct {
	RequestID uint64    `json:"request_id"`
	Message   string    `json:"message"`
	Code      ErrorCode `json:"code"`
}

// Subscribe asks for a subscription (§6, §7, §8.6, §8.9). Start nil = latest; Shard nil =
// shard 0.
type Subscribe struct {
	TenantID       string  `json:"tenant_id"`
	Namespace      string  `json:"namespace"`
	Stream         string  `json:"stream"`
	SubscriptionID *uint64 `json:"subscription_id"`
	Start          *Start  `json:"start"`
	Shard          *uint32 `json:"shard"`
	WithPublisher  bool    `json:"with_publisher"`
}

// Subscribed confirms a registered subscription (§1.3).
type Subscribed struct {
	SubscriptionID uint64 `json:"subscription_id"`
}

// CursorReason is subscribe_cursor_error.reason (§7).
type CursorReason string

// Cursor error reasons.
const (
	CursorTooOld   CursorReason = "too_old"
	CursorInFuture CursorReason = "in_future"
)

// SubscribeCursorError refuses an unservable start offset (§7).
type SubscribeCursorError struct {
	Reason    CursorReason `json:"reason"`
	Requested uint64       `json:"requested"`
	Available uint64       `json:"available"`
}

// EventStreamHello is the first frame on each event uni stream (§1.3, §8.4).
type EventStreamHello struct {
	SubscriptionID uint64 `json:"subscription_id"`
}

// Event is one JSON event (§6, §8.6). Publisher "" = none.
type Event struct {
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Stream    string  `json:"stream"`
	Payload   []byte  `json:"payload"`
	Offset    *uint64 `json:"offset"`
	Publisher string  `json:"publisher"`
}

// JSONEventBatch is the JSON event_batch (§6, §8.5, §8.6). SkippedBefore 0 is omitted;
// Publishers, when present, is parallel to Payloads ("" = none).
type JSONEventBatch struct {
	TenantID      string   `json:"tenant_id"`
	Namespace     string   `json:"namespace"`
	Stream        string   `json:"stream"`
	Payloads      [][]byte `json:"payloads"`
	BaseOffset    *uint64  `json:"base_offset"`
	SkippedBefore uint64   `json:"skipped_before"`
	Publishers    []string `json:"publishers"`
}

// CachePut stores a value (§6). TTLMs nil is encoded as null = no expiry.
type CachePut struct {
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Cache     string  `json:"cache"`
	Key       string  `json:"key"`
	Value     []byte  `json:"value"`
	RequestID *uint64 `json:"request_id"`
	TTLMs     *uint64 `json:"ttl_ms"`
}

// CacheGet reads a value (§6).
type CacheGet struct {
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Cache     string  `json:"cache"`
	Key       string  `json:"key"`
	RequestID *uint64 `json:"request_id"`
}

// CacheValue answers cache_get (§6). Value nil = null = missing/expired; an empty non-nil
// slice is a stored empty value.
type CacheValue struct {
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Cache     string  `json:"cache"`
	Key       string  `json:"key"`
	Value     []byte  `json:"value"`
	RequestID *uint64 `json:"request_id"`
}

// CacheOK answers a cache_put that carried request_id (§6).
type CacheOK struct {
	RequestID uint64 `json:"request_id"`
}

// OK is the generic success (§6).
type OK struct{}

// Error is the generic error (§6, §8.7, §8.8). Code "" and RequestID nil are omitted.
type Error struct {
	Message   string    `json:"message"`
	Code      ErrorCode `json:"code"`
	RequestID *uint64   `json:"request_id"`
}

// CacheDelete removes a key (§8.1). Needs feature cache_delete.
type CacheDelete struct {
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Cache     string  `json:"cache"`
	Key       string  `json:"key"`
	RequestID *uint64 `json:"request_id"`
}

// CacheDeleted answers cache_delete (§8.1). Value is the removed value; nil = null = the key
// did not exist.
type CacheDeleted struct {
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Cache     string  `json:"cache"`
	Key       string  `json:"key"`
	Value     []byte  `json:"value"`
	RequestID *uint64 `json:"request_id"`
}

// CounterAdd adds Delta (two's-complement i64, wrapping) to a counter (§8.2).
type CounterAdd struct {
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Cache     string  `json:"cache"`
	Key       string  `json:"key"`
	Delta     int64   `json:"delta"`
	RequestID *uint64 `json:"request_id"`
}

// CounterGet reads a counter (§8.2).
type CounterGet struct {
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Cache     string  `json:"cache"`
	Key       string  `json:"key"`
	RequestID *uint64 `json:"request_id"`
}

// CounterValue answers counter_add (sum after the add) and counter_get (§8.2).
// Found is the additive found? field (docs/client-protocol.md, counter_value): nil (the
// field absent, as every older broker writes it) means the counter exists; false means a
// counter_get found no counter (never added to, or removed), and Value is then 0 and means
// nothing. A counter_add answer never carries it. Use IsFound to read it.
type CounterValue struct {
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Cache     string  `json:"cache"`
	Key       string  `json:"key"`
	Value     int64   `json:"value"`
	RequestID *uint64 `json:"request_id"`
	Found     *bool   `json:"found,omitempty"`
}

// IsFound reports whether the counter exists: true unless the found? field is present and
// false (an absent field means found, so an older broker's answer reads as found).
func (m *CounterValue) IsFound() bool { return m.Found == nil || *m.Found }

// GroupPoll leases up to MaxRecords records to a consumer group, waiting up to MaxWaitMs
// (§8.3).
type GroupPoll struct {
	TenantID      string `json:"tenant_id"`
	Namespace     string `json:"namespace"`
	Stream        string `json:"stream"`
	Shard         uint32 `json:"shard"`
	Group         string `json:"group"`
	MaxRecords    uint32 `json:"max_records"`
	MaxWaitMs     uint64 `json:"max_wait_ms"`
	WithPublisher bool   `json:"with_publisher"`
	// BinaryRecords asks for the answer as a binary group_records frame
	// (FlagBinaryGroupRecords, group_records.go); omitted when false. A broker that
	// does not know it ignores it and answers JSON.
	BinaryRecords bool   `json:"binary_records"`
	RequestID     uint64 `json:"request_id"`
}

// GroupRecord is one leased record; Delivery counts from 1; Publisher "" = none.
type GroupRecord struct {
	Offset    uint64 `json:"offset"`
	Payload   []byte `json:"payload"`
	Delivery  uint32 `json:"delivery"`
	Publisher string `json:"publisher"`
}

// GroupRecords answers group_poll (§8.3).
type GroupRecords struct {
	RequestID uint64        `json:"request_id"`
	Group     string        `json:"group"`
	Shard     uint32        `json:"shard"`
	Records   []GroupRecord `json:"records"`
}

// GroupAck acknowledges leased offsets (§8.3).
type GroupAck struct {
	TenantID  string   `json:"tenant_id"`
	Namespace string   `json:"namespace"`
	Stream    string   `json:"stream"`
	Shard     uint32   `json:"shard"`
	Group     string   `json:"group"`
	Offsets   []uint64 `json:"offsets"`
	RequestID uint64   `json:"request_id"`
}

// GroupNack returns leased offsets for redelivery after RedeliverAfterMs (0 = at once; nil =
// the group's default redelivery delay) (§8.3).
type GroupNack struct {
	TenantID         string   `json:"tenant_id"`
	Namespace        string   `json:"namespace"`
	Stream           string   `json:"stream"`
	Shard            uint32   `json:"shard"`
	Group            string   `json:"group"`
	Offsets          []uint64 `json:"offsets"`
	RedeliverAfterMs *uint64  `json:"redeliver_after_ms"`
	RequestID        uint64   `json:"request_id"`
}

// GroupOK answers group_ack/group_nack, and dead_letters_redrive with Count (§8.3).
type GroupOK struct {
	RequestID uint64  `json:"request_id"`
	Count     *uint64 `json:"count"`
}

// DeadLettersList pages a group's dead letters from FromOffset (§8.3).
type DeadLettersList struct {
	TenantID   string `json:"tenant_id"`
	Namespace  string `json:"namespace"`
	Stream     string `json:"stream"`
	Shard      uint32 `json:"shard"`
	Group      string `json:"group"`
	FromOffset uint64 `json:"from_offset"`
	Limit      uint32 `json:"limit"`
	RequestID  uint64 `json:"request_id"`
}

// DeadLetter is one dead-lettered offset.
type DeadLetter struct {
	Offset           uint64 `json:"offset"`
	Deliveries       uint32 `json:"deliveries"`
	DeadLetteredAtMs uint64 `json:"dead_lettered_at_ms"`
}

// DeadLetters answers dead_letters_list; NextFrom nil = no more entries (§8.3).
type DeadLetters struct {
	RequestID uint64       `json:"request_id"`
	Group     string       `json:"group"`
	Shard     uint32       `json:"shard"`
	Entries   []DeadLetter `json:"entries"`
	NextFrom  *uint64      `json:"next_from"`
}

// DeadLettersRedrive puts dead-lettered offsets back in the group (§8.3); answered by
// group_ok with count.
type DeadLettersRedrive struct {
	TenantID  string   `json:"tenant_id"`
	Namespace string   `json:"namespace"`
	Stream    string   `json:"stream"`
	Shard     uint32   `json:"shard"`
	Group     string   `json:"group"`
	Offsets   []uint64 `json:"offsets"`
	RequestID uint64   `json:"request_id"`
}

// CacheWatch watches one key or every key with a prefix: exactly one of Key and Prefix is
// non-nil (§8.4). FromOffset (optional, docs/client-protocol.md D16) resumes the watch:
// the first change delivered is the one at that offset of the key's cache shard (the last
// offset seen + 1); nil = changes from now on. Resuming a prefix watch needs a cache of one
// shard. The field is omitted from the JSON when nil, so older messages encode unchanged.
type CacheWatch struct {
	TenantID   string  `json:"tenant_id"`
	Namespace  string  `json:"namespace"`
	Cache      string  `json:"cache"`
	Key        *string `json:"key"`
	Prefix     *string `json:"prefix"`
	FromOffset *uint64 `json:"from_offset"`
	RequestID  uint64  `json:"request_id"`
}

// CacheWatching confirms a watch; its events arrive on a uni stream opened with
// event_stream_hello{subscription_id: WatchID} (§8.4).
type CacheWatching struct {
	RequestID uint64 `json:"request_id"`
	WatchID   uint64 `json:"watch_id"`
}

// CacheChangeOp is cache_change.op.
type CacheChangeOp string

// Cache change operations.
const (
	CacheChangePut    CacheChangeOp = "put"
	CacheChangeDelete CacheChangeOp = "delete"
	CacheChangeExpire CacheChangeOp = "expire"
)

// CacheChange is one committed change seen by a watch (§8.4). Value nil = null (delete,
// expire).
type CacheChange struct {
	WatchID uint64        `json:"watch_id"`
	Key     string        `json:"key"`
	Op      CacheChangeOp `json:"op"`
	Value   []byte        `json:"value"`
	Offset  uint64        `json:"offset"`
}

// CacheUnwatch ends a watch; answered by ok (§8.4).
type CacheUnwatch struct {
	WatchID   uint64  `json:"watch_id"`
	RequestID *uint64 `json:"request_id"`
}

// Owner names a shard owner (§8.9).
type Owner struct {
	NodeID  string `json:"node_id"`
	Address string `json:"address"`
}

// NotLeader redirects a subscribe, or ends a live subscription, to the shard's owner
// (§8.9). RequestID is absent on an event stream.
type NotLeader struct {
	RequestID  *uint64 `json:"request_id"`
	TenantID   string  `json:"tenant_id"`
	Namespace  string  `json:"namespace"`
	Stream     string  `json:"stream"`
	Shard      uint32  `json:"shard"`
	Owner      Owner   `json:"owner"`
	Generation uint64  `json:"generation"`
}

// RouteLookup asks for a stream's shard owners (§8.9).
type RouteLookup struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
	RequestID uint64 `json:"request_id"`
}

// ShardRoute is one shard's owner at a generation.
type ShardRoute struct {
	Shard      uint32 `json:"shard"`
	Owner      Owner  `json:"owner"`
	Generation uint64 `json:"generation"`
}

// Route answers route_lookup (§8.9; docs/client-protocol.md D17). The stream's shard
// count is len(Shards). Routing ("modulo" or "jump_hash", how a routing key picks a shard,
// D15) is optional and additive: a broker that predates it omits it (""), and a client then
// cannot hash a key itself and publishes through the broker it dialled.
type Route struct {
	RequestID uint64       `json:"request_id"`
	Shards    []ShardRoute `json:"shards"`
	Routing   string       `json:"routing,omitempty"`
}
