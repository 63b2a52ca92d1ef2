package cache

// Config bounds one cache shard. A zero field takes the default named beside
// it (DefaultConfig). The engine applies a cache's CacheSpec.Limits to each
// of its shards, so a cache holds up to Shards times these bounds.
type Config struct {
	// MaxEntries bounds the number of stored values (default 4,194,304).
	// Reaching it evicts (docs/cache.md, "Capacity and eviction").
	MaxEntries int
	// MaxBytes bounds the accounted size of stored values: for each, key
	// length + value length + EntryOverheadBytes (default 1 GiB).
	MaxBytes int64
	// MaxCounters bounds the number of counters (default 1,048,576); a new
	// counter beyond it is refused with ErrCapacity.
	MaxCounters int
	// MaxKeyBytes bounds a key's length (default 1024, at most 65535).
	MaxKeyBytes int
	// MaxValueBytes bounds a value's length (default 1 MiB).
	MaxValueBytes int
}

// EntryOverheadBytes is what each stored value adds to the accounted size
// beyond its key and value bytes (an estimate of the index and entry memory).
const EntryOverheadBytes = 64

// maxKeyLimit is the largest key the record layout can carry (u16 length).
const maxKeyLimit = 1<<16 - 1

// DefaultConfig returns the defaults a zero Config field takes.
func DefaultConfig() Config {
	return Config{
		MaxEntries:    1 << 22,
		MaxBytes:      1 << 30,
		MaxCounters:   1 << 20,
		MaxKeyBytes:   1024,
		MaxValueBytes: 1 << 20,
	}
}

// withDefaults fills zero fields and clamps MaxKeyBytes to the layout limit.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxEntries <= 0 {
		c.MaxEntries = d.MaxEntries
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = d.MaxBytes
	}
	if c.MaxCounters <= 0 {
		c.MaxCounters = d.MaxCounters
	}
	if c.MaxKeyBytes <= 0 {
		c.MaxKeyBytes = d.MaxKeyBytes
	}
	if c.MaxKeyBytes > maxKeyLimit {
		c.MaxKeyBytes = maxKeyLimit
	}
	if c.MaxValueBytes <= 0 {
		c.MaxValueBytes = d.MaxValueBytes
	}
	return c
}
