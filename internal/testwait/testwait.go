// Package testwait is the tests' one bounded wait on a condition: poll cond every
// millisecond-scale tick until it holds, failing the test naming what was awaited once the
// wall-clock bound passes. For waits on another process or goroutine a fake clock cannot
// drive (a broker's log, a proxy's release, a Raft election); waits on our own timers use
// clock/clocktest or testing/synctest instead. Tests only.
package testwait

import (
	"testing"
	"time"
)

// Tick is how often Until checks the condition.
const Tick = 5 * time.Millisecond

// Until returns once cond holds; if it does not within d, it fails t with "no WHAT within
// D" (t.Fatalf, so call it from the test's goroutine).
func Until(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(Tick)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, d)
		}
		<-tick.C
	}
}
