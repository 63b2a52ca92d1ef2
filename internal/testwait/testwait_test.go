package testwait

import (
	"strings"
	"testing"
	"time"
)

// fatalT records a Fatalf instead of stopping the goroutine (Until's caller is the test).
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}
func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = format
	panic(f)
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	Until(t, time.Second, "third look", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

func TestUntilFailsAfterTheBound(t *testing.T) {
	f := &fatalT{TB: t}
	func() {
		defer func() {
			if r := recover(); r != f {
				t.Fatalf("Until did not fail the test: %v", r)
			}
		}()
		Until(f, 20*time.Millisecond, "never", func() bool { return false })
	}()
	if !strings.Contains(f.msg, "no %s within") {
		t.Fatalf("failure message %q", f.msg)
	}
}
