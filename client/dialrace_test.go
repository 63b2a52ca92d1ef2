package client

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestConcurrentRedialsKeepTheInstalledConnection: callers that find a slot's connection
// dead at the same time all dial; the first to finish installs its connection and the
// others must keep it, not close it under the callers already using it (they failed with
// "client closed": found by felix-chaos's single-node-kill scenario).
func TestConcurrentRedialsKeepTheInstalledConnection(t *testing.T) {
	b := startBroker(t, "")
	c := b.dial(WithConnPool(1))
	s := c.slots[0]
	s.mu.Lock()
	s.cur.close() // the connection died: every caller redials
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const callers = 8
	got := make([]*conn, callers)
	errs := make([]error, callers)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range callers {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			got[i], errs[i] = s.get(ctx)
		}()
	}
	start.Done()
	done.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if !got[i].alive() {
			t.Fatalf("caller %d was given a connection that a concurrent dial closed", i)
		}
		if got[i] != got[0] {
			t.Fatalf("callers were given different connections: one slot keeps one")
		}
	}
}
