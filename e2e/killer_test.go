package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// workload is what the killer reads of a phase's traffic, and the clock it
// gives the phase: every operation is stamped with epoch when it is sent and
// when it is answered, so an operation was in flight at kill k (epoch k is
// set just before the k-th SIGKILL) when sent < k <= answered.
type workload struct {
	total     int64        // operations the phase will complete
	completed func() int64 // operations answered so far
	inflight  func() int64 // operations sent and not yet answered
	busy      func() bool  // the phase is still sending
	epoch     atomic.Int64 // SIGKILLs so far
}

// killLog is the killer's account of one phase.
type killLog struct {
	seed     uint64
	counted  int     // SIGKILLs that landed while operations were in flight
	idle     int     // SIGKILLs with nothing in flight (not counted)
	inflight []int64 // per counted kill: operations in flight at the kill
	epochs   []int64 // per counted kill: its epoch
}

// killSpread is the share of the phase's operations over which the kills are due: the
// rest is the margin in which kills that fell behind (a kill and restart take longer than
// the operations between two due points) still meet traffic. With a margin of one part in
// kills+1, a 300-kill soak's cache phase ran out of traffic at its 299th kill.
const killSpread = 0.8

// killProgressWait bounds how long the killer waits for the workload to
// reach the next kill's point: the workload only progresses while the broker
// is up, so a longer wait is a stuck client, reported as an error.
const killProgressWait = 2 * time.Minute

// killInflightWait bounds the wait for an operation in flight after the
// kill's point was reached (clients reconnecting after the previous restart).
const killInflightWait = 10 * time.Second

// e2eSeed is FELIX_TEST_SEED when set, else a fresh seed; the test logs it so
// that a failing run's kill schedule replays.
func e2eSeed(t *testing.T) uint64 {
	t.Helper()
	if v := os.Getenv("FELIX_TEST_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FELIX_TEST_SEED=%q: want a uint64", v)
		}
		return s
	}
	return rand.Uint64()
}

// killer SIGKILLs the broker want times while the workload has operations in
// flight and restarts it on the same data dir each time. Kill k is due once
// the workload completed a random point of the k-th of want equal parts of
// the first killSpread of its operations, so the kills spread over the
// traffic and all of them land before it ends; then it waits for an operation in flight and kills
// 0-30 ms later. A kill that finds nothing in flight at the last moment is
// made but not counted, and another follows. It stops when the workload is
// done; the phase checks that want kills were counted. want == 0 is a
// baseline run without kills. It returns the first restart or stall error.
func killer(ctx context.Context, b *broker, want int, w *workload, seed uint64) (*killLog, error) {
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))
	kl := &killLog{seed: seed}
	for kl.counted < want {
		due := int64(float64(w.total) * killSpread * (float64(kl.counted) + 0.1 + 0.8*rng.Float64()) / float64(want))
		pctx, cancel := context.WithTimeout(ctx, killProgressWait)
		err := waitFor(pctx, func() bool { return !w.busy() || w.completed() >= due })
		cancel()
		if err != nil && ctx.Err() == nil {
			return kl, fmt.Errorf("kill %d: the workload stayed at %d of %d operations for %s (due at %d)",
				kl.counted+1, w.completed(), w.total, killProgressWait, due)
		}
		ictx, cancel := context.WithTimeout(ctx, killInflightWait)
		waitFor(ictx, func() bool { return !w.busy() || w.inflight() > 0 })
		cancel()
		sleepCtx(ctx, time.Duration(rng.IntN(30))*time.Millisecond)
		if ctx.Err() != nil {
			return kl, ctx.Err()
		}
		if !w.busy() {
			return kl, nil
		}
		epoch := w.epoch.Add(1)
		n := w.inflight()
		down := time.Now()
		b.kill()
		if n > 0 {
			kl.counted++
			kl.inflight = append(kl.inflight, n)
			kl.epochs = append(kl.epochs, epoch)
		} else {
			kl.idle++
		}
		sleepCtx(ctx, time.Duration(rng.IntN(100))*time.Millisecond)
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = b.start(sctx)
		cancel()
		if err != nil {
			return kl, err
		}
		b.mu.Lock()
		b.downTime += time.Since(down)
		b.mu.Unlock()
	}
	return kl, nil
}

// stamp is one operation's epochs: when it was sent and when answered.
type stamp struct{ sent, answered int64 }

// ackedInflight returns, per counted kill, how many of the operations
// acknowledged (acked[i]) were in flight at it.
func (kl *killLog) ackedInflight(stamps []stamp, acked func(i int) bool) []int {
	out := make([]int, len(kl.epochs))
	for i, st := range stamps {
		if !acked(i) {
			continue
		}
		for k, e := range kl.epochs {
			if st.sent < e && e <= st.answered {
				out[k]++
			}
		}
	}
	return out
}

// rows returns the kill rows of a phase's table: counted kills, idle kills,
// and per kill the acknowledged operations that were in flight.
func (kl *killLog) rows(what string, want int, ackedAt []int) string {
	verdict := "ok"
	if kl.counted < want {
		verdict = "FAIL"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| SIGKILLs with %s in flight (counted) / with nothing in flight (not counted); kill seed FELIX_TEST_SEED=%d | %d (want %d) / %d | %s |\n",
		what, kl.seed, kl.counted, want, kl.idle, verdict)
	if len(ackedAt) > 0 {
		s := slices.Clone(ackedAt)
		slices.Sort(s)
		list := fmt.Sprint(ackedAt)
		if len(ackedAt) > 40 {
			list = fmt.Sprint(ackedAt[:40]) + " …"
		}
		fmt.Fprintf(&b, "| acknowledged %s that were in flight at each kill (min / median / max; per kill) | %d / %d / %d; %s | |\n",
			what, s[0], s[len(s)/2], s[len(s)-1], list)
	}
	return b.String()
}

// failure is the phase's kill failure, or "".
func (kl *killLog) failure(want int) string {
	if kl.counted < want {
		return fmt.Sprintf("only %d SIGKILLs landed while operations were in flight (%d more found none), want %d", kl.counted, kl.idle, want)
	}
	return ""
}
