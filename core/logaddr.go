package core

import (
	"fmt"

	"felix/proto"
)

// ShardKind says whose shard a ShardRef or LogAddr names: a stream's or a
// cache's (1 stream, 2 cache; 0 invalid). A stream and a cache may share a
// name (seeds/internal-protocol.txt, "Replicating a cache"), so the kind is
// part of every shard's identity. It is proto.ShardKind, one type for proto,
// core and cluster/replica, with its String ("stream", "cache" or
// "ShardKind(n)") and HasLog.
type ShardKind = proto.ShardKind

// Shard kinds. The zero value is invalid.
const (
	// ShardStream is a stream shard: its records, producers, group-cursor and
	// dead-letter logs.
	ShardStream = proto.ShardStream
	// ShardCache is a cache shard: its cache-records and counter logs.
	ShardCache = proto.ShardCache
)

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
	if !a.Kind.HasLog(a.Log) {
		return fmt.Errorf("%w: log address %v: a %v shard has no %v log", ErrInvalid, a, a.Kind, a.Log)
	}
	return nil
}
