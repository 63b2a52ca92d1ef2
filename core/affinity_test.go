package core

import (
	"context"
	"runtime"
	"testing"
)

// TestCoresArePinnedWherePermitted: when this process may set a thread's
// affinity, every core reports felix_core_pinned = 1.
func TestCoresArePinnedWherePermitted(t *testing.T) {
	cpus := allowedCPUs()
	if len(cpus) == 0 {
		t.Fatal("sched_getaffinity reported no CPU")
	}
	permitted := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the thread exits with the goroutine: its affinity dies with it
		permitted <- pinThread(cpus[0])
	}()
	if err := <-permitted; err != nil {
		t.Skipf("sched_setaffinity refused here: %v", err)
	}
	e, err := NewEngine(Config{Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	for _, c := range e.cores {
		if !c.metrics.pinned.Load() {
			t.Fatalf("core %d not pinned", c.id)
		}
	}
}
