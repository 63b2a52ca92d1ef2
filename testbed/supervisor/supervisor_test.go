package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStartCapturesOutputAndReadyFile(t *testing.T) {
	s := NewForTest(t)
	p := startHelper(t, s, "node-a", "one", "two")
	var info struct {
		PID  int      `json:"pid"`
		Args []string `json:"args"`
	}
	if err := p.ReadyJSON(&info); err != nil {
		t.Fatal(err)
	}
	if info.PID != p.PID() || strings.Join(info.Args, " ") != "one two" {
		t.Fatalf("ready data %+v, pid %d", info, p.PID())
	}
	ctx := testCtx(t, 30*time.Second)
	if err := p.WaitOutput(ctx, "args one two"); err != nil {
		t.Fatal(err)
	}
	if p.Name() != "node-a" || p.Run() != 1 || p.LogPath() != filepath.Join(s.Dir(), "node-a.log") {
		t.Fatalf("name %q run %d log %q", p.Name(), p.Run(), p.LogPath())
	}
	if _, err := p.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"=== node-a run 1:", "args one two", "ready", "=== node-a run 1: signal killed"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if s.Process("node-a") != p {
		t.Error("Process(name) is not the latest run")
	}
	if _, err := s.Start(ctx, Spec{Name: "node-a", Path: helperBin(t)}); !errors.Is(err, ErrNameInUse) {
		t.Errorf("second Start under one name: %v, want ErrNameInUse", err)
	}
}

func TestTailIsBounded(t *testing.T) {
	b := newTail(10)
	fmt.Fprint(b, "0123456789abcdef")
	if s := b.buf; string(s) != "6789abcdef" {
		t.Fatalf("tail %q", s)
	}
	if lastLines("a\nb\nc\n", 2) != "b\nc" {
		t.Fatal(lastLines("a\nb\nc\n", 2))
	}
}

// freeTCPAddr returns a 127.0.0.1 TCP address free at the time of the call.
func freeTCPAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestReadyURL(t *testing.T) {
	s := NewForTest(t)
	addr := freeTCPAddr(t)
	p, err := s.Start(testCtx(t, time.Minute), Spec{Path: helperBin(t), Args: []string{"-http", addr, "-ready-delay", "100ms"},
		Ready: Ready{URL: "http://" + addr + "/ready"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "helper" {
		t.Errorf("default name %q", p.Name())
	}
	if err := p.WaitOutput(testCtx(t, 10*time.Second), "ready"); err != nil {
		t.Fatal(err)
	}
}

func TestReadyURLMustStayOnThisMachine(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:1/ready", "http://[::1]:1/", "http://localhost:1/", "http://10.213.0.2:8080/ready"} {
		if err := checkURL(u); err != nil {
			t.Errorf("%s refused: %v", u, err)
		}
	}
	for _, u := range []string{"http://192.0.2.7/ready", "http://example.com/", "http://10.0.0.1/", "ftp://127.0.0.1/"} {
		if err := checkURL(u); err == nil {
			t.Errorf("%s accepted", u)
		}
	}
	s := NewForTest(t)
	_, err := s.Start(testCtx(t, time.Minute), Spec{Path: helperBin(t), Ready: Ready{URL: "http://192.0.2.7/ready"}})
	if err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("Start with an outside URL: %v", err)
	}
}

func TestNotReadyInTime(t *testing.T) {
	s := NewForTest(t)
	ready := filepath.Join(t.TempDir(), "never.json")
	start := time.Now()
	_, err := s.Start(testCtx(t, time.Minute), Spec{Path: helperBin(t), Args: []string{"-tick", "50ms"},
		Ready: Ready{File: ready, Timeout: 300 * time.Millisecond}})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "last lines") {
		t.Fatalf("err = %v, want a deadline with the output tail", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v for a 300 ms deadline", d)
	}
	if p := s.Process("helper"); p == nil || p.Running() {
		t.Fatalf("process after a failed readiness: %v", p)
	}
}

func TestExitBeforeReady(t *testing.T) {
	s := NewForTest(t)
	ready := filepath.Join(t.TempDir(), "ready.json")
	_, err := s.Start(testCtx(t, time.Minute), Spec{Path: helperBin(t), Args: []string{"-no-such-flag"}, Ready: Ready{File: ready}})
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "exit 2") {
		t.Fatalf("err = %v, want ErrExited with exit 2", err)
	}
}

func TestExitStatus(t *testing.T) {
	s := NewForTest(t)
	p := startHelper(t, s, "quitter", "-exit-after", "20ms", "-exit-code", "3")
	st, err := p.Wait(testCtx(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if st.Code != 3 || st.Signal != 0 || st.Success() || st.String() != "exit 3" {
		t.Fatalf("status %+v (%s)", st, st)
	}
	if got, ok := p.Status(); !ok || got != st {
		t.Fatalf("Status() = %v, %v", got, ok)
	}
	if err := p.Signal(syscall.SIGTERM); !errors.Is(err, ErrExited) {
		t.Fatalf("signal after exit: %v", err)
	}
}

// lastTick returns the highest "tick N" in out, or -1.
func lastTick(out string) int {
	m := regexp.MustCompile(`tick (\d+)`).FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		return -1
	}
	n, _ := strconv.Atoi(m[len(m)-1][1])
	return n
}

func TestPauseResume(t *testing.T) {
	s := NewForTest(t)
	p := startHelper(t, s, "ticker", "-tick", "5ms")
	ctx := testCtx(t, 30*time.Second)
	if err := p.WaitOutput(ctx, "tick 1\n"); err != nil {
		t.Fatal(err)
	}
	if err := p.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if paused, err := p.Paused(); err != nil || !paused {
		t.Fatalf("Paused() = %v, %v after Pause", paused, err)
	}
	st, err := procState(p.PID())
	if err != nil || st != 'T' {
		t.Fatalf("/proc state %q, %v", st, err)
	}
	if err := p.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if paused, err := p.Paused(); err != nil || paused {
		t.Fatalf("Paused() = %v, %v after Resume", paused, err)
	}
	next := lastTick(p.Tail()) + 2
	if err := p.WaitOutput(ctx, fmt.Sprintf("tick %d\n", next)); err != nil {
		t.Fatalf("no ticks after Resume: %v", err)
	}
}

func TestTerminateDrains(t *testing.T) {
	s := NewForTest(t)
	p := startHelper(t, s, "drainer", "-drain", "100ms")
	st, err := p.Terminate(testCtx(t, 30*time.Second), 20*time.Second)
	if err != nil || !st.Success() {
		t.Fatalf("Terminate = %v, %v", st, err)
	}
	if !strings.Contains(p.Tail(), "draining\ndrained\n") {
		t.Fatalf("tail %q", p.Tail())
	}
}

func TestTerminateDrainTimeoutKills(t *testing.T) {
	s := NewForTest(t)
	p := startHelper(t, s, "stubborn", "-ignore-term")
	start := time.Now()
	st, err := p.Terminate(testCtx(t, 30*time.Second), 300*time.Millisecond)
	if !errors.Is(err, ErrDrainTimeout) || st.Signal != syscall.SIGKILL {
		t.Fatalf("Terminate = %v, %v; want ErrDrainTimeout and SIGKILL", st, err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 15*time.Second {
		t.Errorf("Terminate took %v for a 300 ms drain", d)
	}
	if !strings.Contains(p.Tail(), "ignoring SIGTERM") {
		t.Errorf("tail %q", p.Tail())
	}
}

func TestTerminatePausedProcessDrains(t *testing.T) {
	s := NewForTest(t)
	p := startHelper(t, s, "sleeper", "-drain", "10ms")
	ctx := testCtx(t, 30*time.Second)
	if err := p.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := p.Terminate(ctx, 20*time.Second)
	if err != nil || !st.Success() {
		t.Fatalf("Terminate of a paused process = %v, %v", st, err)
	}
}

func TestKillWaitsUntilGone(t *testing.T) {
	s := NewForTest(t)
	p := startHelper(t, s, "victim", "-tick", "10ms")
	ctx := testCtx(t, 30*time.Second)
	st, err := p.Kill(ctx)
	if err != nil || st.Signal != syscall.SIGKILL || st.Code != -1 {
		t.Fatalf("Kill = %+v, %v", st, err)
	}
	if p.Running() {
		t.Fatal("running after Kill")
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", p.PID())); err == nil {
		if st, err := procState(p.PID()); err == nil && st == 'Z' {
			t.Fatal("still a zombie after Kill")
		}
	}
	if st2, err := p.Kill(ctx); err != nil || st2 != st {
		t.Fatalf("second Kill = %v, %v", st2, err)
	}
}

func TestRestartSameAndChanged(t *testing.T) {
	s := NewForTest(t)
	ctx := testCtx(t, time.Minute)
	p1 := startHelper(t, s, "phoenix", "first")
	if _, err := p1.Restart(ctx, nil); !errors.Is(err, ErrRunning) {
		t.Fatalf("Restart of a running process: %v", err)
	}
	if _, err := p1.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	p2, err := p1.Restart(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p2.Run() != 2 || p2.PID() == p1.PID() || p2.WaitOutput(ctx, "args first") != nil {
		t.Fatalf("same-spec restart: run %d pid %d (was %d), tail %q", p2.Run(), p2.PID(), p1.PID(), p2.Tail())
	}
	if _, err := p2.Terminate(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	p3, err := p2.Restart(ctx, func(sp *Spec) {
		sp.Name = "ignored"
		sp.Args = append(sp.Args[:2], "-print-env", "NODE_COLOR", "second")
		sp.Env = append(sp.Env, "NODE_COLOR=blue")
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"args second", "env NODE_COLOR=blue set=true"} {
		if err := p3.WaitOutput(ctx, want); err != nil {
			t.Fatalf("changed restart: %v; tail %q", err, p3.Tail())
		}
	}
	if p3.Name() != "phoenix" || p3.Run() != 3 || s.Process("phoenix") != p3 {
		t.Fatalf("name %q run %d", p3.Name(), p3.Run())
	}
	log, _ := os.ReadFile(p3.LogPath())
	if n := strings.Count(string(log), "=== phoenix run "); n != 5 { // 3 starts, 2 exits so far
		t.Fatalf("%d run markers in the log:\n%s", n, log)
	}
}

func TestPeakRSS(t *testing.T) {
	s := NewForTest(t)
	p := startHelper(t, s, "hog", "-alloc-mib", "48")
	ctx := testCtx(t, 30*time.Second)
	if _, err := p.Kill(ctx); err != nil { // Kill reads VmHWM right before the signal
		t.Fatal(err)
	}
	if got := p.PeakRSS(); got < 48<<20 || got > 1<<30 {
		t.Fatalf("peak RSS %d bytes, want ≥ 48 MiB", got)
	}
	if _, err := PeakRSS(1 << 30); err == nil {
		t.Fatal("PeakRSS of a pid that cannot exist succeeded")
	}
}

func TestCloseKillsEverything(t *testing.T) {
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := startHelper(t, s, "a", "-ignore-term")
	b := startHelper(t, s, "b")
	if err := b.Pause(testCtx(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Process{a, b} {
		if st, ok := p.Status(); !ok || st.Signal != syscall.SIGKILL {
			t.Errorf("%s after Close: %v, exited %v", p.Name(), st, ok)
		}
	}
	if _, err := s.Start(testCtx(t, time.Minute), Spec{Path: helperBin(t)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
