package memnet

// The testing/synctest pattern for timer-driven goroutine code, for later
// packages to copy: run the test in a bubble (synctest.Test), create the
// network and every goroutine inside it, and assert on time.Since: timers
// and sleeps are virtual, fire as soon as every goroutine of the bubble is
// blocked, and take exactly their duration, so the test needs no real
// sleep and no tolerance. The code under test here is a retry-with-backoff
// helper, talking to an echo server over a lossy memnet.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"felix/cluster/sim"
	"felix/internal/testseed"
)

// retry calls try (attempt 0, 1, …) until it returns nil or attempts are
// spent, sleeping base, 2×base, 4×base … (at most maxDelay) between
// attempts. It returns nil, the last error of try, or ctx's error when ctx
// ends first.
func retry(ctx context.Context, attempts int, base, maxDelay time.Duration, try func(attempt int) error) error {
	var err error
	delay := base
	for a := range attempts {
		if err = try(a); err == nil {
			return nil
		}
		if a == attempts-1 {
			break
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, maxDelay)
	}
	return err
}

var errTimeout = errors.New("no answer")

const (
	rpcTimeout = 5 * time.Millisecond
	backoff    = 10 * time.Millisecond
	backoffMax = 80 * time.Millisecond
)

// echoBed starts an echo server on node 2 and returns the client's request
// function (node 1): send, wait for the answer at most rpcTimeout.
func echoBed(t *testing.T, n *Net[string]) func(attempt int) error {
	go func() {
		for d := range n.Recv(2) {
			_ = n.Send(2, 1, "echo "+d.Msg)
		}
	}()
	answers := n.Recv(1)
	return func(attempt int) error {
		msg := fmt.Sprint(attempt)
		if err := n.Send(1, 2, msg); err != nil {
			return err
		}
		select {
		case d := <-answers:
			if d.Msg != "echo "+msg {
				t.Errorf("attempt %d got %q", attempt, d.Msg)
			}
			return nil
		case <-time.After(rpcTimeout):
			return errTimeout
		}
	}
}

// expectedElapsed is the virtual time of a retry that succeeds at attempt
// k: k timeouts and k backoffs, then one round trip.
func expectedElapsed(k int, rtt time.Duration) time.Duration {
	total, delay := time.Duration(0), backoff
	for range k {
		total += rpcTimeout + delay
		delay = min(2*delay, backoffMax)
	}
	return total + rtt
}

func TestRetryWithBackoff(t *testing.T) {
	seed := testseed.Seed(t, 4)
	synctest.Test(t, func(t *testing.T) {
		n := New(Config[string]{Seed: seed, Link: sim.LinkFaults{Delay: time.Millisecond, DropPercent: 60}})
		defer n.Close()
		t.Logf("%s", n.Describe())
		try := echoBed(t, n)
		attempts := 0
		start := time.Now()
		err := retry(context.Background(), 20, backoff, backoffMax, func(a int) error {
			attempts++
			return try(a)
		})
		elapsed := time.Since(start)
		if err != nil {
			t.Fatalf("seed %d: %v after %d attempts\n%s", seed, err, attempts, testseed.Replay(t, seed))
		}
		if want := expectedElapsed(attempts-1, 2*time.Millisecond); elapsed != want {
			t.Fatalf("seed %d: succeeded at attempt %d after %v, want exactly %v", seed, attempts, elapsed, want)
		}
		t.Logf("answered at attempt %d after %v of virtual time", attempts, elapsed)
	})
}

// A dead link: every attempt times out and the helper gives up after the
// last one, at an exact virtual time.
func TestRetryGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(Config[string]{Seed: 1})
		defer n.Close()
		n.Partition([]sim.NodeID{1}, []sim.NodeID{2})
		try := echoBed(t, n)
		start := time.Now()
		err := retry(context.Background(), 4, backoff, backoffMax, try)
		// 4 timeouts and the 3 backoffs between them: 4×5 + 10 + 20 + 40 ms.
		if got := time.Since(start); !errors.Is(err, errTimeout) || got != 90*time.Millisecond {
			t.Fatalf("retry = %v after %v, want %v after 90ms", err, got, errTimeout)
		}
	})
}

// The context ends the backoff sleep, not only the attempts.
func TestRetryStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(Config[string]{Seed: 1})
		defer n.Close()
		n.Partition([]sim.NodeID{1}, []sim.NodeID{2})
		try := echoBed(t, n)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := retry(ctx, 100, backoff, backoffMax, try)
		// attempt (5ms), sleep 10, attempt (5), then the 20ms sleep is cut at 30ms.
		if got := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || got != 30*time.Millisecond {
			t.Fatalf("retry = %v after %v, want deadline exceeded after 30ms", err, got)
		}
	})
}
