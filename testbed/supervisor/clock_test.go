package supervisor

import (
	"strings"
	"testing"
	"time"
)

func TestClockEnvRoundTrip(t *testing.T) {
	for _, c := range []Clock{{}, {Offset: -1500 * time.Millisecond}, {Rate: 2.5}, {Offset: time.Hour, Rate: 0.5}} {
		env, err := c.Env()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		got, err := ParseClock(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
		if err != nil {
			t.Fatal(err)
		}
		want := c
		if want.Rate == 0 {
			want.Rate = 1
		}
		if got != want {
			t.Errorf("%+v: env %q parsed back as %+v", c, env, got)
		}
	}
	if env, _ := (Clock{Offset: -1500 * time.Millisecond, Rate: 2}).Env(); strings.Join(env, " ") !=
		"FELIX_TEST_CLOCK_OFFSET_MS=-1500 FELIX_TEST_CLOCK_RATE=2" {
		t.Errorf("env %q", env)
	}
	for _, bad := range []Clock{{Rate: -1}, {Offset: time.Microsecond}} {
		if _, err := bad.Env(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	for _, v := range []string{"0", "-1", "x", "NaN"} {
		if _, err := ParseClock(func(k string) (string, bool) { return v, k == EnvClockRate }); err == nil {
			t.Errorf("rate %q accepted", v)
		}
	}
}

// The hook is set on the one process whose Spec has a Clock, and stripped from the
// environment every other process inherits.
func TestClockHookSetOnOneProcessOnly(t *testing.T) {
	t.Setenv(EnvClockRate, "7") // as if the test binary itself had the variable
	s := NewForTest(t)
	ctx := testCtx(t, time.Minute)
	vars := []string{"-print-env", EnvClockOffsetMS + "," + EnvClockRate}
	skewed := startHelperClock(t, s, "skewed", &Clock{Offset: -1500 * time.Millisecond, Rate: 2}, vars)
	plain := startHelperClock(t, s, "plain", nil, vars)
	for _, want := range []string{EnvClockOffsetMS + "=-1500 set=true", EnvClockRate + "=2 set=true"} {
		if err := skewed.WaitOutput(ctx, want); err != nil {
			t.Fatalf("%v; tail %q", err, skewed.Tail())
		}
	}
	for _, want := range []string{EnvClockOffsetMS + "= set=false", EnvClockRate + "= set=false"} {
		if err := plain.WaitOutput(ctx, want); err != nil {
			t.Fatalf("%v; tail %q", err, plain.Tail())
		}
	}
}

func startHelperClock(t *testing.T, s *Supervisor, name string, c *Clock, args []string) *Process {
	t.Helper()
	p, err := s.Start(testCtx(t, time.Minute), Spec{Name: name, Path: helperBin(t), Args: args, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
