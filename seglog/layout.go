package seglog

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// ShardKind separates streams from caches on disk, so a stream and a cache of
// the same name never share a directory (spec/storage-format.md §6, PROPOSED;
// decided in docs/storage-format.md "Directories").
type ShardKind uint8

// Shard kinds and their root directories under FELIX_DURABLE_STORAGE_DIR.
const (
	ShardStream ShardKind = iota // <root>/streams/<name>
	ShardCache                   // <root>/caches/<name>
)

// Companion names a companion log kept in a sub-directory of a shard directory
// (spec/storage-format.md §6): each is a full segment log with its own offsets.
type Companion string

// Companion logs of stream shards (group cursors, dead letters) and of cache
// shards (counters).
const (
	CompanionGroups      Companion = "groups"
	CompanionDeadLetters Companion = "dead-letters"
	CompanionCounters    Companion = "counters"
)

// ShardKey identifies one shard's directory.
type ShardKey struct {
	Kind        ShardKind
	Tenant      string
	Namespace   string
	Name        string // stream or cache name
	Shard       uint32
	Incarnation uint64 // 0 = legacy directory name; > 0 appends "~i<n>"
}

// ShardDir returns the directory of a shard's primary log:
// <root>/streams/<v1 name> or <root>/caches/<v1 name>, with "~i<incarnation>"
// appended for incarnation > 0. The v1 name is V1ShardDirName. Every package
// (core, cache, groups) derives shard paths through this one function.
func ShardDir(root string, k ShardKey) string {
	sub := "streams"
	if k.Kind == ShardCache {
		sub = "caches"
	}
	name := V1ShardDirName(k.Tenant, k.Namespace, k.Name, k.Shard)
	if k.Incarnation > 0 {
		name += "~i" + strconv.FormatUint(k.Incarnation, 10)
	}
	return filepath.Join(root, sub, name)
}

// CompanionDir returns the directory of companion log c of the shard whose
// primary log lives in shardDir: <shardDir>/<c>.
func CompanionDir(shardDir string, c Companion) string {
	return filepath.Join(shardDir, string(c))
}

// V1ShardDirName returns the v1 shard directory name
// "<readable tenant>_<readable ns>_<readable stream>_<shard>-<fnv1a64 hex16>"
// (spec/storage-format.md §3; vectors/storage/golden.md §4).
func V1ShardDirName(tenant, namespace, stream string, shard uint32) string {
	return fmt.Sprintf("%s_%s_%s_%d-%016x", readable(tenant), readable(namespace), readable(stream), shard,
		shardHash(tenant, namespace, stream, shard))
}

func readable(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 32 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

func shardHash(tenant, namespace, stream string, shard uint32) uint64 {
	h := uint64(0xcbf29ce484222325)
	mix := func(b []byte) {
		for _, c := range b {
			h ^= uint64(c)
			h *= 0x100000001b3
		}
	}
	var n [8]byte
	for _, s := range []string{tenant, namespace, stream} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		mix(n[:])
		mix([]byte(s))
	}
	binary.BigEndian.PutUint32(n[:4], shard)
	mix(n[:4])
	return h
}

// SegmentFileName returns "<id as 20 zero-padded digits>.log" (§3).
func SegmentFileName(id uint64) string { return fmt.Sprintf("%020d.log", id) }

// IndexFileName returns "<id as 20 zero-padded digits>.index" (§3).
func IndexFileName(id uint64) string { return fmt.Sprintf("%020d.index", id) }

// parseSegmentName returns the id of a "<20 digits>.log" name.
func parseSegmentName(name string) (uint64, bool) {
	if len(name) != 24 || !strings.HasSuffix(name, ".log") {
		return 0, false
	}
	id, err := strconv.ParseUint(name[:20], 10, 64)
	return id, err == nil
}
