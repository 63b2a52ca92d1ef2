package core

import (
	"fmt"

	"felix/proto"
)

// ShardKind says whose shard a ShardRef or LogAddr names: a stream's or a
// cache's. A stream and a cache may share a name (seeds/internal-protocol.txt,
// "Replicating a cache"), so the kind is part of every shard's identity.
type ShardKind uint8

// Shard kinds. The zero value is invalid.
const (
	// ShardStream is a stream shard: its records, producers, group-cursor and
	// dead-letter logs.
	ShardStream ShardKind = 1
	// ShardCache is a cache shard: its cache-records and counter logs.
	ShardCache ShardKind = 2
)

// String returns "stream", "cache" or "ShardKind(n)".
func (k ShardKind) String() string {
	switch k {
	case ShardStream:
		return "stream"
	case ShardCache:
		return "cache"
	}
	return fmt.Sprintf("ShardKind(%d)", uint8(k))
}

// ShardRef names one shard of one stream or cache on any node. For a cache,
// Name carries the cache's tenant, namespace and cache name in its Tenant,
// Namespace and Stream fields. Shard is 0-based.
type ShardRef struct {
	Kind  ShardKind
	Name  StreamName
	Shard int
}

// String returns "stream:tenant/ns/name#shard" (or "cache:...").
func (r ShardRef) String() string {
	return fmt.Sprintf("%v:%v#%d", r.Kind, r.Name, r.Shard)
}

// LogAddr names one log of one shard: the shard, the incarnation of the
// stream or cache it belongs to (0 until stream_incarnations /
// cache_incarnations is finalized; seeds/upgrades-and-compatibility.txt) and
// which of the shard's logs, in the enum FLXI uses (proto.ReplicaLog). Every
// log a core opens, reads or replicates is named by one.
type LogAddr struct {
	Kind        ShardKind
	Name        StreamName
	Shard       int
	Incarnation uint64
	Log         proto.ReplicaLog
}

// Ref returns the shard the log belongs to.
func (a LogAddr) Ref() ShardRef { return ShardRef{Kind: a.Kind, Name: a.Name, Shard: a.Shard} }

// String returns "stream:tenant/ns/name#shard/records@incarnation".
func (a LogAddr) String() string {
	return fmt.Sprintf("%v/%v@%d", a.Ref(), a.Log, a.Incarnation)
}

// Validate reports whether the address names a log a shard of its kind has:
// a stream shard has the stream, producers, group-cursor and dead-letter logs;
// a cache shard the cache and counter logs. Anything else, an unknown kind or
// an invalid proto.ReplicaLog included, is an error wrapping ErrInvalid; it is
// never remapped onto another log.
func (a LogAddr) Validate() error {
	if a.Shard < 0 {
		return fmt.Errorf("%w: log address %v: negative shard", ErrInvalid, a)
	}
	if !a.Log.Valid() {
		return fmt.Errorf("%w: log address %v: unknown log %d", ErrInvalid, a, uint8(a.Log))
	}
	ok := false
	switch a.Kind {
	case ShardStream:
		ok = a.Log == proto.LogStream || a.Log == proto.LogProducers ||
			a.Log == proto.LogGroupCursors || a.Log == proto.LogDeadLetters
	case ShardCache:
		ok = a.Log == proto.LogCache || a.Log == proto.LogCounters
	}
	if !ok {
		return fmt.Errorf("%w: log address %v: a %v shard has no %v log", ErrInvalid, a, a.Kind, a.Log)
	}
	return nil
}
