package scenario

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// KillTarget is what a Killer faults: Kill applies the fault and returns once it took
// effect (for a process: SIGKILLed and reaped); Restart brings the target back and
// returns once it is ready again.
type KillTarget interface {
	Kill(ctx context.Context) error
	Restart(ctx context.Context) error
}

// Bounds of the killer's waits.
const (
	// KillProgressWait bounds the wait for the load to reach the next kill's point with an
	// operation in flight on the restarted target: the load only progresses while the
	// target is up, so a longer wait is a stuck client, reported as an error.
	KillProgressWait = 2 * time.Minute
	// KillRestartWait bounds one restart (the broker's recovery included).
	KillRestartWait = time.Minute
)

// KillSpread is the share of the load's operations over which the kills are due; the
// rest is the margin in which kills that fell behind still meet traffic (e2e's
// killSpread: with a margin of one part in kills+1, a 300-kill soak ran out of traffic).
const KillSpread = 0.8

// KillLog is a Killer's account.
type KillLog struct {
	Want     int             // kills asked for
	Counted  int             // kills that found operations in flight
	Idle     int             // kills that found none (made, not counted)
	InFlight []int64         // per counted kill: operations invoked since the previous kill and in flight at it
	Epochs   []int64         // per counted kill: its Tracker epoch
	Down     []time.Duration // per kill (counted or not): from the kill to the target being ready again
}

// Killer faults target want times while tr shows operations in flight, restarting it
// after each. Kill k is due once the load completed a random point (drawn from rng) of
// the k-th of want equal parts of the first KillSpread of total operations; the killer
// then also waits (without sleeping: Tracker.Wait) until an operation completed ok since
// the previous restart and one invoked since then is in flight, and kills at once. A
// kill that finds no such operation at the last instant is made but not counted (Idle),
// and another follows. It stops when want kills were counted, or when the load finished
// (Tracker.Finish) with nothing in flight; the caller compares Counted with Want.
// Errors: a restart that fails or exceeds KillRestartWait, a load that does not progress
// for KillProgressWait, ctx's error.
func Killer(ctx context.Context, target KillTarget, tr *Tracker, want int, total int64, rng *rand.Rand) (KillLog, error) {
	kl := KillLog{Want: want}
	for kl.Counted < want {
		due := int64(float64(total) * KillSpread * (float64(kl.Counted) + 0.1 + 0.8*rng.Float64()) / float64(want))
		pctx, cancel := context.WithTimeout(ctx, KillProgressWait)
		err := tr.Wait(pctx, func(s TrackerState) bool {
			return (s.Done && s.InFlight == 0) || (s.Completed >= due && s.OKSince > 0 && s.Fresh > 0)
		})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return kl, ctx.Err()
			}
			st := tr.State()
			return kl, fmt.Errorf("kill %d: the load stayed at %d of %d operations (due at %d; %d in flight, %d of them fresh, %d ok since the restart) for %s",
				kl.Counted+1, st.Completed, total, due, st.InFlight, st.Fresh, st.OKSince, KillProgressWait)
		}
		if st := tr.State(); st.Done && st.InFlight == 0 {
			return kl, nil
		}
		st := tr.Fault()
		down := time.Now()
		if err := target.Kill(ctx); err != nil {
			return kl, fmt.Errorf("kill %d: %w", kl.Counted+1, err)
		}
		if st.Fresh > 0 {
			kl.Counted++
			kl.InFlight = append(kl.InFlight, st.Fresh)
			kl.Epochs = append(kl.Epochs, st.Epoch)
		} else {
			kl.Idle++
		}
		rctx, cancel := context.WithTimeout(ctx, KillRestartWait)
		err = target.Restart(rctx)
		cancel()
		if err != nil {
			return kl, fmt.Errorf("restart after kill %d: %w", kl.Counted+kl.Idle, errors.Join(err, ctx.Err()))
		}
		kl.Down = append(kl.Down, time.Since(down))
	}
	return kl, nil
}

// spread renders min / median / max of xs ("-" when empty).
func spread[T int | int64 | time.Duration](xs []T) string {
	if len(xs) == 0 {
		return "-"
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	show := func(x T) any {
		if d, ok := any(x).(time.Duration); ok {
			return d.Round(time.Millisecond)
		}
		return x
	}
	return fmt.Sprintf("%v / %v / %v", show(s[0]), show(s[len(s)/2]), show(s[len(s)-1]))
}

// meanDuration is the mean of ds rounded to the millisecond (0 when empty).
func meanDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return (sum / time.Duration(len(ds))).Round(time.Millisecond)
}
