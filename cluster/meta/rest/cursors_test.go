package rest

import (
	"testing"

	"felix/cluster/meta"
)

// TestFeedCursorInBrokers: the feed cursor a broker sends with its
// registration and heartbeats (issue 17 item 3) is shown by GET /v1/brokers,
// the latest one, steady heartbeats (no Raft entry) included; a broker that
// sent none shows none.
func TestFeedCursorInBrokers(t *testing.T) {
	_, srv := member(t, meta.Config{}, false)
	expect(t, srv, "POST", "/v1/brokers", `{"node_id":"b1","feed_cursor":5}`, 200)
	expect(t, srv, "POST", "/v1/brokers", `{"node_id":"b2"}`, 200)
	cursorOf := func(node string) *FeedCursorSeen {
		t.Helper()
		var bs []BrokerView
		if code, _ := call(t, srv, "GET", "/v1/brokers", "", &bs); code != 200 {
			t.Fatalf("GET /v1/brokers: %d", code)
		}
		for _, b := range bs {
			if b.NodeID == node {
				return b.FeedCursorSeen
			}
		}
		t.Fatalf("%s not listed", node)
		return nil
	}
	if c := cursorOf("b1"); c == nil || c.Cursor != 5 || c.AtMs == 0 {
		t.Fatalf("b1 after its registration: %+v, want cursor 5", c)
	}
	expect(t, srv, "POST", "/v1/brokers/b1/heartbeat", `{"feed_cursor":9}`, 204)
	if c := cursorOf("b1"); c == nil || c.Cursor != 9 {
		t.Fatalf("b1 after a heartbeat: %+v, want cursor 9", c)
	}
	expect(t, srv, "POST", "/v1/brokers/b1/heartbeat", `{}`, 204)
	if c := cursorOf("b1"); c == nil || c.Cursor != 9 {
		t.Fatalf("b1 after a heartbeat without a cursor: %+v, want 9 kept", c)
	}
	if c := cursorOf("b2"); c != nil {
		t.Fatalf("b2 sent no cursor, shows %+v", c)
	}
}
