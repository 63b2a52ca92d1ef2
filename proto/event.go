package proto

import "unicode/utf8"

// EventBatch is a binary event batch (spec/client-protocol.md §5.4, §5.5, §8.5, §8.6).
// Decoded slices are sub-slices of the body (zero-copy). Reuse one EventBatch across frames:
// decoding reuses the capacity of Payloads and Publishers and then allocates nothing.
type EventBatch struct {
	Shared         bool   // true: 0x0004 (no subscription id); false: legacy 0x0002
	SubscriptionID uint64 // legacy only
	WithOffsets    bool   // 0x0020: BaseOffset present
	BaseOffset     uint64 // payload i is at BaseOffset+i
	// SkippedBefore is the number of offsets just below BaseOffset that hold no deliverable
	// record (§8.5). Non-zero sets 0x0800 and requires WithOffsets.
	SkippedBefore uint64
	// WithPublishers (0x1000): Publishers[i] is payload i's publishing principal (empty = none),
	// each at most 255 bytes of UTF-8.
	WithPublishers bool
	Publishers     [][]byte
	Payloads       [][]byte
}

// Flags returns the frame flags the batch encodes with.
func (e *EventBatch) Flags() uint16 {
	f := FlagBinaryEventBatch
	if e.Shared {
		f = FlagBinaryEventBatchShared
	}
	if e.WithOffsets {
		f |= FlagEventBatchOffsets
	}
	if e.SkippedBefore != 0 {
		f |= FlagEventBatchSkipped
	}
	if e.WithPublishers {
		f |= FlagEventBatchPublishers
	}
	return f
}

// DecodeEventBatch decodes an event batch body whose header carried flags (any combination
// ClassifyFlags maps to LayoutEventBatch or LayoutSharedEventBatch) into dst. Errors are
// *DecodeError; a flag combination that is not an event batch is ErrFlagCombination, and a
// frame with 0x0800 whose skipped_before is 0 is ErrMalformed (the broker sets the bit only
// when it is non-zero).
func DecodeEventBatch(flags uint16, body []byte, dst *EventBatch) error {
	layout, err := ClassifyFlags(flags)
	if err != nil {
		return err
	}
	if layout != LayoutEventBatch && layout != LayoutSharedEventBatch {
		return decodeErr("flags", 6, ErrFlagCombination)
	}
	*dst = EventBatch{Shared: layout == LayoutSharedEventBatch, Payloads: dst.Payloads[:0], Publishers: dst.Publishers[:0]}
	c := cursor{b: body}
	if !dst.Shared {
		if dst.SubscriptionID, err = c.u64("subscription_id"); err != nil {
			return err
		}
	}
	if flags&FlagEventBatchOffsets != 0 {
		dst.WithOffsets = true
		if dst.BaseOffset, err = c.u64("base_offset"); err != nil {
			return err
		}
	}
	if flags&FlagEventBatchSkipped != 0 {
		start := c.off
		if dst.SkippedBefore, err = c.u64("skipped_before"); err != nil {
			return err
		}
		if dst.SkippedBefore == 0 {
			return decodeErr("skipped_before", start, ErrMalformed)
		}
	}
	if flags&FlagEventBatchPublishers == 0 {
		if dst.Payloads, err = c.payloads("payloads", dst.Payloads); err != nil {
			return err
		}
		return c.end("payloads")
	}
	dst.WithPublishers = true
	return decodePublisherEntries(&c, dst)
}

// decodePublisherEntries reads count × (u8 publisher_len, publisher, u32 len, payload).
// Minimum entry size is 5 bytes, so count ≤ remaining/5 is checked before allocating.
func decodePublisherEntries(c *cursor, dst *EventBatch) error {
	n, err := c.count("count", 5)
	if err != nil {
		return err
	}
	if cap(dst.Payloads) < n {
		dst.Payloads = make([][]byte, 0, n)
	}
	if cap(dst.Publishers) < n {
		dst.Publishers = make([][]byte, 0, n)
	}
	for i := 0; i < n; i++ {
		pub, err := c.str8("publisher")
		if err != nil {
			return err
		}
		p, err := c.bytes32("payload")
		if err != nil {
			return err
		}
		dst.Publishers = append(dst.Publishers, pub)
		dst.Payloads = append(dst.Payloads, p)
	}
	return c.end("payloads")
}

// AppendEventBatch appends a whole frame (header + body) for e with flags e.Flags().
// It returns dst unchanged and ErrMalformed when SkippedBefore is set without WithOffsets or
// Publishers does not match Payloads in length, ErrTooLong for a publisher over 255 bytes,
// ErrInvalidUTF8 for a publisher that is not UTF-8.
func AppendEventBatch(dst []byte, e *EventBatch) ([]byte, error) {
	if e.SkippedBefore != 0 && !e.WithOffsets {
		return dst, ErrMalformed
	}
	if e.WithPublishers {
		if len(e.Publishers) != len(e.Payloads) {
			return dst, ErrMalformed
		}
		for _, p := range e.Publishers {
			if len(p) > 255 {
				return dst, ErrTooLong
			}
			if !utf8.Valid(p) {
				return dst, ErrInvalidUTF8
			}
		}
	}
	out, start := beginFrame(dst, e.Flags())
	if !e.Shared {
		out = appendU64(out, e.SubscriptionID)
	}
	if e.WithOffsets {
		out = appendU64(out, e.BaseOffset)
	}
	if e.SkippedBefore != 0 {
		out = appendU64(out, e.SkippedBefore)
	}
	if !e.WithPublishers {
		out = appendPayloads(out, e.Payloads)
		return endFrame(out, start), nil
	}
	out = appendU32(out, uint32(len(e.Payloads)))
	for i, p := range e.Payloads {
		out = append(out, byte(len(e.Publishers[i])))
		out = append(out, e.Publishers[i]...)
		out = appendU32(out, uint32(len(p)))
		out = append(out, p...)
	}
	return endFrame(out, start), nil
}

// AppendSharedEventBatch appends a whole shared event batch frame (flags 0x0004, or 0x0024
// with withOffsets) for a committed batch whose first payload is at baseOffset. The core
// encodes each committed batch once per variant and hands the same []byte to every
// subscriber (spec/client-protocol.md §5.5). Allocates nothing beyond the growth of dst.
func AppendSharedEventBatch(dst []byte, baseOffset uint64, withOffsets bool, payloads [][]byte) []byte {
	flags := FlagBinaryEventBatchShared
	if withOffsets {
		flags |= FlagEventBatchOffsets
	}
	out, start := beginFrame(dst, flags)
	if withOffsets {
		out = appendU64(out, baseOffset)
	}
	out = appendPayloads(out, payloads)
	return endFrame(out, start)
}

// AppendLegacyEventBatch appends a whole legacy event batch frame (flags 0x0002, or 0x0022
// with withOffsets) for one subscriber: the replay/history encoding (§5.4).
func AppendLegacyEventBatch(dst []byte, subscriptionID, baseOffset uint64, withOffsets bool, payloads [][]byte) []byte {
	flags := FlagBinaryEventBatch
	if withOffsets {
		flags |= FlagEventBatchOffsets
	}
	out, start := beginFrame(dst, flags)
	out = appendU64(out, subscriptionID)
	if withOffsets {
		out = appendU64(out, baseOffset)
	}
	out = appendPayloads(out, payloads)
	return endFrame(out, start)
}
