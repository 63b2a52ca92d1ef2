package clock

import (
	"testing"
	"time"
)

func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func TestFromEnv(t *testing.T) {
	if _, on, err := FromEnv(env(nil)); on || err != nil {
		t.Fatalf("no variables: hook %v, err %v", on, err)
	}
	c, on, err := FromEnv(env(map[string]string{EnvOffsetMS: "-7200000", EnvRate: "0.5"}))
	if !on || err != nil {
		t.Fatalf("both set: hook %v, err %v", on, err)
	}
	s := c.(*skewed)
	if s.offset != -2*time.Hour || s.rate != 0.5 {
		t.Fatalf("parsed offset %v rate %v", s.offset, s.rate)
	}
	for _, bad := range []map[string]string{
		{EnvOffsetMS: "1.5"}, {EnvOffsetMS: "99999999999999999"}, {EnvRate: "0"}, {EnvRate: "-1"},
		{EnvRate: "NaN"}, {EnvRate: "2e9"}, {EnvRate: "fast"},
	} {
		if _, _, err := FromEnv(env(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestSkewedArithmetic checks the formula of the package doc on a clock whose start is
// moved back instead of waiting: elapsed real time 10 s at rate 0.5 reads as 5 s.
func TestSkewedArithmetic(t *testing.T) {
	c := &skewed{start: time.Now().Add(-10 * time.Second), offset: time.Hour, rate: 0.5}
	mono := time.Duration(c.MonoNanos())
	if mono < 5*time.Second || mono > 6*time.Second {
		t.Fatalf("mono %v after 10 s real at rate 0.5, want ~5 s", mono)
	}
	wall := time.UnixMicro(c.WallMicros())
	want := c.start.Add(time.Hour + mono)
	if d := wall.Sub(want); d < -time.Second || d > time.Second {
		t.Fatalf("wall %v, want about %v (start + offset + mono)", wall, want)
	}
	r := Real()
	if d := time.Since(time.UnixMicro(r.WallMicros())); d < -time.Second || d > time.Second {
		t.Fatalf("Real wall off by %v", d)
	}
}

// TestSkewedTimerRunsOnTheClocksTime: a timer of a clock at rate 1000 fires after a
// thousandth of its duration in real time (10 s of clock time: well under the 5 s bound).
func TestSkewedTimerRunsOnTheClocksTime(t *testing.T) {
	c := Skewed(0, 1000)
	tm := c.NewTimer(10 * time.Second)
	select {
	case <-tm.C():
	case <-time.After(5 * time.Second):
		t.Fatal("a 10 s timer at rate 1000 did not fire within 5 s of real time")
	}
	if tm.Stop() {
		t.Fatal("a fired timer is not active")
	}
	if tm.Reset(time.Hour) || !tm.Stop() {
		t.Fatal("Reset reports the fired timer inactive and arms it; Stop reports it active")
	}
}
