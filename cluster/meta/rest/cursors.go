package rest

import (
	"sync"

	"felix/cluster/meta"
)

// registrationBody is POST /v1/brokers: a meta.RegisterBroker plus the
// broker's feed cursor (issue 17 item 3: the last change-feed seq it applied;
// absent from older brokers). The cursor is not a Raft entry field: it moves
// with every page the broker reads, so it is kept, as reported, on the member
// that took the request (the leader: writes are forwarded there).
type registrationBody struct {
	meta.RegisterBroker
	FeedCursor *uint64 `json:"feed_cursor,omitempty"`
}

// heartbeatBody is POST /v1/brokers/{id}/heartbeat: a meta.Heartbeat plus
// the feed cursor (registrationBody).
type heartbeatBody struct {
	meta.Heartbeat
	FeedCursor *uint64 `json:"feed_cursor,omitempty"`
}

// FeedCursorSeen is a broker's feed cursor as last reported to this member:
// Cursor, the seq it had applied through, and AtMs, this member's clock when
// it arrived (Unix ms).
type FeedCursorSeen struct {
	Cursor uint64 `json:"feed_cursor"`
	AtMs   int64  `json:"feed_cursor_at_ms"`
}

// cursors holds the feed cursors reported to this member, by node id.
type cursors struct {
	mu   sync.Mutex
	seen map[string]FeedCursorSeen
}

// note keeps node's reported cursor (nil: the broker sent none; kept as
// before).
func (c *cursors) note(node string, cursor *uint64, atMs int64) {
	if cursor == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]FeedCursorSeen{}
	}
	c.seen[node] = FeedCursorSeen{Cursor: *cursor, AtMs: atMs}
}

// get gives node's last reported cursor, if any.
func (c *cursors) get(node string) (FeedCursorSeen, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.seen[node]
	return s, ok
}
