package broker

import (
	"felix/core"
	"felix/core/cache"
	"felix/core/groups"
)

// shardService is the engine as the session handlers see it: routing, then one call on a
// resolved shard of a stream or cache (docs/architecture.md, "Broker seams"). Handlers
// reach it through session.svc (Server.svc), never through the *core.Engine itself, so
// forwarding (issue 19) can stand a per-shard serve / forward / redirect in front of it.
// Shapes, errors and the goroutines callbacks run on are core's (each method is the
// *core.Engine method of the same name): done callbacks run on a core goroutine and must
// not block; a shard not open here answers core.ErrNotHere once core's per-shard API is in.
type shardService interface {
	// Route resolves a publish's shard (routing key, else idempotent producer, else round-robin).
	Route(stream core.StreamName, key []byte, producerID string, sequence uint64) (int, error)
	Publish(req *core.PublishRequest, done func(core.PublishResult, error)) error
	Subscribe(req core.SubscribeRequest) (*core.Subscription, error)

	// RouteCache resolves a key's cache shard.
	RouteCache(name core.CacheName, key []byte) (int, error)
	CachePut(name core.CacheName, shard int, key, value []byte, ttl cache.TTL, done func(error)) error
	CacheGet(name core.CacheName, shard int, key []byte, done func(value []byte, found bool, err error)) error
	CacheDelete(name core.CacheName, shard int, key []byte, done func(value []byte, found bool, err error)) error
	CounterAdd(name core.CacheName, shard int, key []byte, delta int64, done func(sum int64, err error)) error
	// CounterGet answers found=false for a counter that does not exist (absent, not zero).
	CounterGet(name core.CacheName, shard int, key []byte, done func(sum int64, found bool, err error)) error
	CacheWatch(req core.CacheWatchRequest) (*core.CacheWatcher, error)

	CreateGroup(name core.StreamName, shard int, group string, cfg groups.GroupConfig, done func(error)) error
	GroupPoll(req core.GroupPollRequest, done func([]core.GroupRecord, error)) error
	GroupAck(req core.GroupAckRequest, done func(error)) error
	GroupNack(req core.GroupAckRequest, done func(error)) error
	DeadLetters(req core.DeadLettersRequest, done func([]groups.DeadLetter, uint64, error)) error
	Redrive(req core.RedriveRequest, done func(int, error)) error
}

var _ shardService = (*core.Engine)(nil)
