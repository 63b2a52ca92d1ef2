package core

// Routing of a publish to a shard (docs/architecture.md, core; seeds/
// upgrades-and-compatibility.txt "jump_hash_routing").
//
// The key hash is FNV-1a 64 over the key bytes. It is part of the stored
// meaning of a stream (which shard holds which key), so it never changes.

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// KeyHash returns FNV-1a 64 of key: the hash both routings start from.
func KeyHash(key []byte) uint64 {
	h := uint64(fnvOffset64)
	for _, b := range key {
		h ^= uint64(b)
		h *= fnvPrime64
	}
	return h
}

// JumpHash maps key to a bucket in [0, buckets) with jump consistent hashing
// (Lamping and Veach, 2014): growing buckets from n to n+1 moves only about
// 1/(n+1) of the keys. buckets < 1 returns 0.
func JumpHash(key uint64, buckets int) int {
	var b, j int64 = -1, 0
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	if b < 0 {
		return 0
	}
	return int(b)
}

// RouteKey returns the shard of key in a stream of shards shards under r.
func RouteKey(r Routing, key []byte, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := KeyHash(key)
	if r == RoutingJumpHash {
		return JumpHash(h, shards)
	}
	return int(h % uint64(shards))
}

// coreOf picks the core that owns shard of the stream named n: consecutive
// shards of one stream land on consecutive cores. Not persistent: a restart
// with another core count may place shards differently.
func coreOf(n StreamName, shard, cores int) int {
	h := uint64(fnvOffset64)
	for _, s := range [...]string{n.Tenant, n.Namespace, n.Stream} {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= fnvPrime64
		}
		h ^= 0xff
		h *= fnvPrime64
	}
	return int((h + uint64(shard)) % uint64(cores))
}
