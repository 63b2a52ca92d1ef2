package scenario

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func TestTrackerCountsFreshOperations(t *testing.T) {
	tr := NewTracker()
	old := tr.Invoke()
	st := tr.Fault() // old is in flight at fault 1
	if st.Fresh != 1 || st.InFlight != 1 || st.Epoch != 1 {
		t.Fatalf("state at the fault %+v", st)
	}
	if s := tr.State(); s.Fresh != 0 || s.InFlight != 1 || s.OKSince != 0 {
		t.Fatalf("after the fault %+v", s)
	}
	fresh := tr.Invoke()
	tr.Complete(old, true) // answered after the fault: acked in flight at it
	if s := tr.State(); s.Fresh != 1 || s.InFlight != 1 || s.OKSince != 1 || s.Completed != 1 {
		t.Fatalf("after the old one completed %+v", s)
	}
	tr.Complete(fresh, false)
	if s := tr.State(); s.Fresh != 0 || s.InFlight != 0 || s.Completed != 2 {
		t.Fatalf("after both %+v", s)
	}
	if got := tr.AckedAtFaults([]int64{1}); got[0] != 1 {
		t.Fatalf("AckedAtFaults %v, want [1]", got)
	}
}

func TestTrackerWaitWakesAndIsBounded(t *testing.T) {
	tr := NewTracker()
	done := make(chan error, 1)
	go func() {
		done <- tr.Wait(context.Background(), func(s TrackerState) bool { return s.Completed >= 3 })
	}()
	for range 3 {
		tr.Complete(tr.Invoke(), true)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := tr.Wait(ctx, func(s TrackerState) bool { return s.Done }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a condition that never holds: %v", err)
	}
}

// fakeTarget counts kills and restarts; a load blocked by it resumes at each restart.
type fakeTarget struct {
	mu         sync.Mutex
	kills      int
	restarts   int
	restartErr error
}

func (f *fakeTarget) Kill(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kills++
	return nil
}

func (f *fakeTarget) Restart(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restarts++
	return f.restartErr
}

// fakeLoad runs total operations on workers goroutines through tr, each completing
// ok at once, then Finishes.
func fakeLoad(tr *Tracker, workers int, total int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := int64(0)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				n := next
				next++
				mu.Unlock()
				if n >= total {
					return
				}
				tr.Complete(tr.Invoke(), true)
			}
		}()
	}
	go func() { wg.Wait(); tr.Finish() }()
	return &wg
}

func TestKillerLandsKillsWhileOperationsAreInFlight(t *testing.T) {
	tr, target := NewTracker(), &fakeTarget{}
	const total, want = 200_000, 5
	load := fakeLoad(tr, 4, total)
	kl, err := Killer(context.Background(), target, tr, want, total, rand.New(rand.NewPCG(1, 2)))
	load.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if kl.Counted != want || len(kl.InFlight) != want || len(kl.Epochs) != want {
		t.Fatalf("kill log %+v", kl)
	}
	if made := kl.Counted + kl.Idle; target.kills != made || target.restarts != made || len(kl.Down) != made {
		t.Fatalf("%d kills made, target saw %d kills and %d restarts, %d down times", made, target.kills, target.restarts, len(kl.Down))
	}
	for i, n := range kl.InFlight {
		if n <= 0 || (i > 0 && kl.Epochs[i] <= kl.Epochs[i-1]) {
			t.Fatalf("counted kill %d: %d in flight, epochs %v", i, n, kl.Epochs)
		}
	}
	t.Logf("%d counted, %d idle; in flight %v", kl.Counted, kl.Idle, kl.InFlight)
}

func TestKillerStopsWhenTheLoadEnds(t *testing.T) {
	tr, target := NewTracker(), &fakeTarget{}
	load := fakeLoad(tr, 2, 50)
	load.Wait()
	kl, err := Killer(context.Background(), target, tr, 1000, 50, rand.New(rand.NewPCG(3, 4)))
	if err != nil || kl.Counted != 0 || target.kills != 0 {
		t.Fatalf("a finished load: %+v, %v, %d kills", kl, err, target.kills)
	}
}

func TestKillerReportsRestartFailuresAndContext(t *testing.T) {
	tr, target := NewTracker(), &fakeTarget{restartErr: errors.New("address already in use")}
	load := fakeLoad(tr, 2, 100_000)
	_, err := Killer(context.Background(), target, tr, 3, 100_000, rand.New(rand.NewPCG(5, 6)))
	load.Wait()
	if err == nil || target.kills != 1 {
		t.Fatalf("restart failure: %v after %d kills", err, target.kills)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Killer(ctx, &fakeTarget{}, NewTracker(), 1, 10, rand.New(rand.NewPCG(7, 8))); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}
