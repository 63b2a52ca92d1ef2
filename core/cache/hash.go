package cache

// ShardOf maps a key to one of shards cache shards (shards ≥ 1; 0 is treated
// as 1): FNV-1a 64 of the key, then jump consistent hashing (Lamping & Veach),
// so growing the shard count moves only about 1/shards of the keys. Every
// broker must use this one function: the shard a forward names has to be the
// shard the key resolves to (seeds/internal-protocol.txt).
func ShardOf(key []byte, shards uint32) uint32 {
	if shards <= 1 {
		return 0
	}
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for _, c := range key {
		h ^= uint64(c)
		h *= prime64
	}
	var b, j int64 = -1, 0
	for j < int64(shards) {
		b = j
		h = h*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((h>>33)+1)))
	}
	return uint32(b)
}
