package client

// The broker's key routing (core/routing.go), mirrored so a keyed publisher can hash a key
// to its shard itself (direct-to-owner publishing, docs/client-protocol.md D17). The SDK
// does not import core (the broker's engine); TestRouteKeyMatchesCore checks the two agree
// on random keys and shard counts for both routings.

// routeKey is core.RouteKey: FNV-1a 64 of key, then jump hash (jump) or modulo over shards
// (shards <= 1: 0).
func routeKey(jump bool, key []byte, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := uint64(14695981039346656037)
	for _, b := range key {
		h ^= uint64(b)
		h *= 1099511628211
	}
	if !jump {
		return int(h % uint64(shards))
	}
	var b, j int64 = -1, 0
	for j < int64(shards) {
		b = j
		h = h*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((h>>33)+1)))
	}
	return int(max(b, 0))
}
