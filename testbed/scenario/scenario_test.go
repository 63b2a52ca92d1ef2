package scenario

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"felix/client"
	"felix/proto"
	"felix/testbed/history"
)

func TestRegisterRefusesBadScenarios(t *testing.T) {
	run := func(context.Context, *Env) (Result, error) { return Result{}, nil }
	for _, s := range []Scenario{
		{Name: "", Description: "d", Run: run},
		{Name: "Upper", Description: "d", Run: run},
		{Name: "1abc", Description: "d", Run: run},
		{Name: "a b", Description: "d", Run: run},
		{Name: "ok-name", Description: "", Run: run},
		{Name: "ok-name", Description: "two\nlines", Run: run},
		{Name: "ok-name", Description: "d"},
	} {
		if err := Register(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", s.Name, err)
		}
	}
	s := Scenario{Name: "test-registry-dup", Description: "d", Run: run}
	if err := Register(s); err != nil {
		t.Fatal(err)
	}
	if err := Register(s); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second Register: %v, want ErrDuplicate", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("MustRegister of a duplicate did not panic")
		}
	}()
	MustRegister(s)
}

func TestRegistryListsSingleNodeKill(t *testing.T) {
	s, ok := Lookup(SingleNodeKill)
	if !ok || s.Run == nil || s.Defaults.Kills != 20 || s.Defaults.Ops <= 0 || s.Defaults.Duration <= 0 {
		t.Fatalf("Lookup(%q) = %+v, %v", SingleNodeKill, s, ok)
	}
	if _, ok := Lookup("no-such-scenario"); ok {
		t.Fatal("Lookup of an unknown name succeeded")
	}
	names := Names()
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Fatalf("Names not sorted: %v", names)
		}
	}
	if len(All()) != len(names) {
		t.Fatalf("All and Names disagree: %d, %d", len(All()), len(names))
	}
}

func TestSizesWithDefaults(t *testing.T) {
	def := Sizes{Ops: 100, Kills: 7, Duration: time.Minute}
	for _, c := range []struct{ in, want Sizes }{
		{Sizes{Kills: -1}, def},
		{Sizes{Ops: 5, Kills: 0, Duration: time.Second}, Sizes{Ops: 5, Kills: 0, Duration: time.Second}},
		{Sizes{Ops: -3, Kills: 2, Duration: -1}, Sizes{Ops: 100, Kills: 2, Duration: time.Minute}},
	} {
		if got := c.in.WithDefaults(def); got != c.want {
			t.Errorf("%+v.WithDefaults = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestSeedSources(t *testing.T) {
	n := uint64(9)
	if s, src, err := Seed(&n); s != 9 || src != "--seed" || err != nil {
		t.Fatalf("explicit: %d %q %v", s, src, err)
	}
	t.Setenv(SeedEnv, "12345")
	if s, src, err := Seed(nil); s != 12345 || src != SeedEnv || err != nil {
		t.Fatalf("env: %d %q %v", s, src, err)
	}
	if s, _, _ := Seed(&n); s != 9 {
		t.Fatalf("--seed must win over %s: %d", SeedEnv, s)
	}
	t.Setenv(SeedEnv, "-1")
	if _, _, err := Seed(nil); err == nil || !strings.Contains(err.Error(), SeedEnv) {
		t.Fatalf("malformed env: %v", err)
	}
	t.Setenv(SeedEnv, "")
	if _, src, err := Seed(nil); src != "random" || err != nil {
		t.Fatalf("unset: %q %v", src, err)
	}
}

func TestPortsBelowTheEphemeralRange(t *testing.T) {
	low, high := PortRange()
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		start, _ := strconv.Atoi(strings.Fields(string(b))[0])
		if high != start {
			t.Fatalf("PortRange high %d, ephemeral range starts at %d", high, start)
		}
	}
	if low < 1024 || low >= high {
		t.Fatalf("PortRange [%d, %d)", low, high)
	}
	seen := map[int]bool{}
	for range 5 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < low || p >= high || seen[p] {
			t.Fatalf("FreePort %d: outside [%d, %d) or repeated (%v)", p, low, high, seen)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not bindable: %v", p, err)
		}
		l.Close()
	}
}

func TestWriteCertPinsItsDER(t *testing.T) {
	c, err := WriteCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(pair.Certificate[0])
	if c.Fingerprint != hex.EncodeToString(sum[:]) {
		t.Fatalf("fingerprint %s is not the SHA-256 of the DER", c.Fingerprint)
	}
	for _, f := range []string{c.CertFile, c.KeyFile} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, fi, err)
		}
	}
}

func TestOutcomes(t *testing.T) {
	refused := &client.ServerError{Code: proto.CodeOverloaded, Message: "queue full"}
	indet := &client.ServerError{Code: proto.CodeIndeterminate, Message: "lost"}
	notSent := fmt.Errorf("%w: request not sent", client.ErrShardUnavailable)
	lost := fmt.Errorf("%w: stream ended", client.ErrIndeterminate)
	for _, c := range []struct {
		err          error
		sdk, publish history.Outcome
	}{
		{nil, history.OK, history.OK},
		{lost, history.Info, history.Info},
		{indet, history.Info, history.Info},
		{refused, history.Fail, history.Info},
		{notSent, history.Fail, history.Info},
		{client.ErrTooLarge, history.Fail, history.Fail},
		{fmt.Errorf("%w: feature", client.ErrUnsupported), history.Fail, history.Fail},
		{context.DeadlineExceeded, history.Info, history.Info},
		{errors.New("felix: dial: timeout"), history.Info, history.Info},
	} {
		if got := SDKOutcome(c.err); got != c.sdk {
			t.Errorf("SDKOutcome(%v) = %s, want %s", c.err, got, c.sdk)
		}
		if got := PublishOutcome(c.err); got != c.publish {
			t.Errorf("PublishOutcome(%v) = %s, want %s", c.err, got, c.publish)
		}
	}
}

func TestResultTable(t *testing.T) {
	var r Result
	r.Note("figure", "%d ops", 3)
	r.Check("holds", true, "yes")
	r.Check("pipe | in it", false, "no\nreally")
	if p, f := r.Counts(); p != 1 || f != 1 || r.Passed() {
		t.Fatalf("Counts %d/%d, Passed %v", p, f, r.Passed())
	}
	if got := r.Failures(); len(got) != 1 || got[0] != "pipe | in it: no\nreally" {
		t.Fatalf("Failures %q", got)
	}
	var b bytes.Buffer
	r.Print(&b)
	for _, want := range []string{"| figure | 3 ops |  |", "| holds | yes | ok |", `| pipe \| in it | no really | FAIL |`, ": FAIL in "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("Print lacks %q:\n%s", want, b.String())
		}
	}
	if (Result{Rows: []Row{{Check: "x"}}}).Passed() {
		t.Error("a result with only notes passed")
	}
}

func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "felix-broker")); err != nil {
		t.Fatalf("root %s: %v", root, err)
	}
}

// TestRunGivesTheScenarioItsEnv runs a scenario that only inspects its Env (no binaries
// are built: Bins is given).
func TestRunGivesTheScenarioItsEnv(t *testing.T) {
	var got *Env
	var deadline time.Time
	s := Scenario{Name: "test-env", Description: "d", Defaults: Sizes{Ops: 10, Kills: 2, Duration: time.Hour},
		Run: func(ctx context.Context, env *Env) (Result, error) {
			got, deadline = env, time.Time{}
			if d, ok := ctx.Deadline(); ok {
				deadline = d
			}
			op := env.History.Invoke(0, "c", history.KindCacheGet, history.Input{Cache: "c", Key: history.Bytes("k")})
			op.Ok(history.Output{})
			env.Logf("hello %d", 1)
			var r Result
			r.Check("ran", true, "seed %d", env.Seed)
			return r, nil
		}}
	var log bytes.Buffer
	dir := filepath.Join(t.TempDir(), "w")
	res, err := Run(context.Background(), s, RunOptions{Seed: 5, Dir: dir, Sizes: Sizes{Kills: -1, Duration: time.Minute},
		Bins: Binaries{Broker: "/bin/true", CLI: "/bin/true"}, Log: &log})
	if err != nil || !res.Passed() || res.Seed != 5 || res.Dir != dir {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	if got.Sizes != (Sizes{Ops: 10, Kills: 2, Duration: time.Minute}) || got.Seed != 5 || got.Dir != dir {
		t.Fatalf("env %+v", got)
	}
	if until := time.Until(deadline); until <= 0 || until > time.Minute {
		t.Fatalf("the run's context deadline is %s away, want within the 1m Duration", until)
	}
	if h, err := history.LoadFile(got.HistoryPath); err != nil || len(h.Ops) != 1 {
		t.Fatalf("history %s: %v, %v", got.HistoryPath, h, err)
	}
	if log.String() != "hello 1\n" {
		t.Fatalf("log %q", log.String())
	}
	if got.Rand(1).Uint64() != got.Rand(1).Uint64() || got.Rand(1).Uint64() == got.Rand(2).Uint64() {
		t.Fatal("Rand(stream) is not a function of the seed and the stream")
	}
}

func TestRunFailsAScenarioThatErrsOrChecksNothing(t *testing.T) {
	for name, run := range map[string]func(context.Context, *Env) (Result, error){
		"test-errs": func(context.Context, *Env) (Result, error) {
			var r Result
			r.Check("first step", true, "ok")
			return r, errors.New("broker would not start")
		},
		"test-empty": func(context.Context, *Env) (Result, error) { return Result{}, nil },
	} {
		s := Scenario{Name: name, Description: "d", Defaults: Sizes{Ops: 1, Duration: time.Minute}, Run: run}
		res, err := Run(context.Background(), s, RunOptions{Dir: t.TempDir(), Bins: Binaries{Broker: "/bin/true", CLI: "/bin/true"}})
		if err != nil || res.Passed() {
			t.Fatalf("%s: %+v, %v", name, res, err)
		}
		if f := res.Failures(); len(f) != 1 || !strings.HasPrefix(f[0], "scenario ran to the end: ") {
			t.Fatalf("%s: failures %q", name, f)
		}
	}
}
