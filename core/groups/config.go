package groups

import "fmt"

// Defaults and bounds of a group's configuration. docs/groups.md, "Defaults".
const (
	DefaultVisibilityTimeoutMillis = 30_000 // a lease lasts 30 s
	DefaultMaxDeliveries           = 5      // the 5th failed delivery dead-letters the offset
	DefaultRedeliveryDelayMillis   = 1_000  // a nack without a delay waits 1 s
	DefaultMaxPollRecords          = 1_000  // upper bound on records returned by one Poll

	MaxVisibilityTimeoutMillis = 12 * 3600 * 1000 // 12 h, also the bound on a nack delay
	MaxMaxDeliveries           = 1_000_000
	MaxPollRecordsLimit        = 10_000 // spec/storage-format.md §5 max_records_per_read
	MaxGroupNameBytes          = 255
)

// GroupConfig is one group's configuration. It is written into the group's create
// record on the cursor log, so a restart keeps it. Zero fields take the defaults above.
type GroupConfig struct {
	VisibilityTimeoutMillis int64  // lease length in ms, 1..MaxVisibilityTimeoutMillis
	MaxDeliveries           uint32 // deliveries before dead-lettering, 1..MaxMaxDeliveries
	RedeliveryDelayMillis   int64  // nack delay when the nack names none, 0..MaxVisibilityTimeoutMillis
	MaxPollRecords          uint32 // cap on Poll's max, 1..MaxPollRecordsLimit
}

// withDefaults fills zero fields and checks bounds; errors wrap ErrInvalidRequest.
func (c GroupConfig) withDefaults() (GroupConfig, error) {
	if c.VisibilityTimeoutMillis == 0 {
		c.VisibilityTimeoutMillis = DefaultVisibilityTimeoutMillis
	}
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = DefaultMaxDeliveries
	}
	if c.RedeliveryDelayMillis == 0 {
		c.RedeliveryDelayMillis = DefaultRedeliveryDelayMillis
	}
	if c.MaxPollRecords == 0 {
		c.MaxPollRecords = DefaultMaxPollRecords
	}
	switch {
	case c.VisibilityTimeoutMillis < 1 || c.VisibilityTimeoutMillis > MaxVisibilityTimeoutMillis:
		return c, fmt.Errorf("%w: visibility timeout %d ms", ErrInvalidRequest, c.VisibilityTimeoutMillis)
	case c.MaxDeliveries > MaxMaxDeliveries:
		return c, fmt.Errorf("%w: max deliveries %d", ErrInvalidRequest, c.MaxDeliveries)
	case c.RedeliveryDelayMillis < 0 || c.RedeliveryDelayMillis > MaxVisibilityTimeoutMillis:
		return c, fmt.Errorf("%w: redelivery delay %d ms", ErrInvalidRequest, c.RedeliveryDelayMillis)
	case c.MaxPollRecords > MaxPollRecordsLimit:
		return c, fmt.Errorf("%w: max poll records %d", ErrInvalidRequest, c.MaxPollRecords)
	}
	return c, nil
}

// checkGroupName validates a group name (1..MaxGroupNameBytes bytes, any bytes).
func checkGroupName(name string) error {
	if len(name) == 0 || len(name) > MaxGroupNameBytes {
		return fmt.Errorf("%w: %d bytes", ErrInvalidGroupName, len(name))
	}
	return nil
}

// GroupID is the 64-bit id of a group name: FNV-1a 64 over the name's bytes
// (spec/storage-format.md §7.1).
func GroupID(name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return h
}
