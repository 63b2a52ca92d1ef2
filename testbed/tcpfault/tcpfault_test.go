package tcpfault

import (
	"bufio"
	"errors"
	"io"
	"net"
	"slices"
	"syscall"
	"testing"
	"time"
)

// echoServer accepts on 127.0.0.1:0 and echoes every byte back until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends one byte and waits (at most 5 s) for its echo.
func roundTrip(c net.Conn) (time.Duration, error) {
	start := time.Now()
	c.SetDeadline(start.Add(5 * time.Second))
	if _, err := c.Write([]byte{'x'}); err != nil {
		return 0, err
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// medianRTT is the median of n round trips on c.
func medianRTT(t *testing.T, c net.Conn, n int) time.Duration {
	t.Helper()
	d := make([]time.Duration, n)
	for i := range d {
		var err error
		if d[i], err = roundTrip(c); err != nil {
			t.Fatalf("round trip %d: %v", i, err)
		}
	}
	slices.Sort(d)
	return d[n/2]
}

func TestEchoThroughProxy(t *testing.T) {
	up := echoServer(t)
	p := StartForTest(t, up)
	if p.Upstream() != up {
		t.Fatalf("upstream %q", p.Upstream())
	}
	c := dial(t, p.Addr())
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "hello\n" {
		t.Fatalf("echo %q, %v", line, err)
	}
}

func TestLatencyWithinTenPercent(t *testing.T) {
	p := StartForTest(t, echoServer(t))
	c := dial(t, p.Addr())
	base := medianRTT(t, c, 15)
	const each = 100 * time.Millisecond
	names, err := p.Latency(Both, each, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || !slices.Equal(p.Toxics(), names) {
		t.Fatalf("toxics %q, listed %q", names, p.Toxics())
	}
	// The median of 15 round trips, one delay each way; a CPU-starved machine can add its
	// own scheduling delay, so up to three measurements are taken and one must fit.
	want := 2 * each
	for attempt := 1; ; attempt++ {
		added := medianRTT(t, c, 15) - base
		t.Logf("base %v, added %v (measurement %d)", base, added, attempt)
		if added >= want*9/10 && added <= want*11/10 {
			break
		}
		if added < want*9/10 || attempt == 3 {
			t.Fatalf("added round-trip latency %v (base %v), want %v ± 10%%", added, base, want)
		}
	}
	if err := p.Remove(names...); err != nil {
		t.Fatal(err)
	}
	if after := medianRTT(t, c, 15); after > base+20*time.Millisecond {
		t.Fatalf("round trip %v after the removal, base %v", after, base)
	}
	if err := p.Remove(names[0]); !errors.Is(err, ErrUnknownToxic) {
		t.Fatalf("second removal: %v", err)
	}
}

// transfer writes n bytes and reads their echo; it returns how long that took.
func transfer(t *testing.T, c net.Conn, n int) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetDeadline(start.Add(30 * time.Second))
	errc := make(chan error, 1)
	go func() { _, err := c.Write(make([]byte, n)); errc <- err }()
	if _, err := io.ReadFull(c, make([]byte, n)); err != nil {
		t.Fatalf("read echo: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	return time.Since(start)
}

func TestBandwidthIsCapped(t *testing.T) {
	p := StartForTest(t, echoServer(t))
	c := dial(t, p.Addr())
	const n, rate = 200_000, 400_000 // bytes, bytes per second: 0.5 s at the cap
	free := transfer(t, c, n)
	if _, err := p.Bandwidth(Downstream, rate); err != nil {
		t.Fatal(err)
	}
	capped := transfer(t, c, n)
	t.Logf("%d bytes: %v uncapped, %v at %d B/s", n, free, capped, rate)
	ideal := time.Duration(n) * time.Second / rate
	if capped < ideal*8/10 || capped > 10*ideal {
		t.Fatalf("capped transfer took %v, want about %v", capped, ideal)
	}
	if free > ideal/2 {
		t.Logf("uncapped transfer slow on this machine (%v); the cap is still checked from below", free)
	}
	if _, err := p.Bandwidth(Downstream, 999); err == nil {
		t.Fatal("a rate under 1000 B/s was accepted")
	}
}

// reset_peer closes a connection at its next data: with a TCP RST when the connection was
// made after the toxic (toxiproxy sets SO_LINGER 0 when a link starts), with a FIN before.
func TestResetPeerResetsTheConnection(t *testing.T) {
	p := StartForTest(t, echoServer(t))
	old := dial(t, p.Addr())
	if _, err := roundTrip(old); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ResetPeer(Downstream, 0); err != nil {
		t.Fatal(err)
	}
	fresh := dial(t, p.Addr())
	for _, c := range []struct {
		name  string
		conn  net.Conn
		wants error
	}{{"a connection made before the toxic", old, io.EOF}, {"a connection made after it", fresh, syscall.ECONNRESET}} {
		_, err := roundTrip(c.conn)
		if !errors.Is(err, c.wants) && !(c.wants == io.EOF && errors.Is(err, syscall.ECONNRESET)) {
			t.Fatalf("%s: round trip after reset_peer: %v, want %v", c.name, err, c.wants)
		}
		t.Logf("%s: %v", c.name, err)
	}
}

func TestTimeoutStopsDataThenCloses(t *testing.T) {
	p := StartForTest(t, echoServer(t))
	c := dial(t, p.Addr())
	if _, err := p.Timeout(Upstream, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := roundTrip(c)
	if d := time.Since(start); err == nil || d < 150*time.Millisecond || d > 4*time.Second {
		t.Fatalf("round trip under timeout 200ms: %v after %v", err, d)
	}
	if err := p.RemoveAll(); err != nil {
		t.Fatal(err)
	}
	hang, err := p.Timeout(Upstream, 0)
	if err != nil {
		t.Fatal(err)
	}
	c2 := dial(t, p.Addr())
	c2.SetDeadline(time.Now().Add(300 * time.Millisecond))
	c2.Write([]byte{'x'})
	var ne net.Error
	if _, err := c2.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read under timeout 0: %v, want a hang (read deadline)", err)
	}
	if err := p.Remove(hang...); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(dial(t, p.Addr())); err != nil {
		t.Fatalf("new connection after the removal: %v", err)
	}
}

func TestDisableEnable(t *testing.T) {
	p := StartForTest(t, echoServer(t))
	c := dial(t, p.Addr())
	if _, err := roundTrip(c); err != nil {
		t.Fatal(err)
	}
	if err := p.Disable(); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(c); err == nil {
		t.Fatal("a connection survived Disable")
	}
	if c, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second); err == nil {
		c.Close()
		t.Fatal("dial succeeded while disabled")
	}
	if err := p.Enable(); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(dial(t, p.Addr())); err != nil {
		t.Fatalf("after Enable: %v", err)
	}
	p.Close()
	if err := p.Enable(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Enable after Close: %v", err)
	}
	if _, err := p.Latency(Both, time.Millisecond, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Latency after Close: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	for _, up := range []string{"192.0.2.1:80", "example.com:80", "10.0.0.1:80", "127.0.0.1", "127.0.0.1:0"} {
		if p, err := Start(up); err == nil {
			p.Close()
			t.Errorf("upstream %q accepted", up)
		}
	}
	if _, err := Start("192.0.2.1:80"); !errors.Is(err, ErrNotLocal) {
		t.Errorf("outside upstream: %v", err)
	}
	p := StartForTest(t, "127.0.0.1:9")
	if _, err := p.AddToxic("latency", 0, 1, nil); !errors.Is(err, ErrNoDirection) {
		t.Errorf("no direction: %v", err)
	}
	if _, err := p.AddToxic("latency", Upstream, 1.5, nil); err == nil {
		t.Error("toxicity 1.5 accepted")
	}
	if _, err := p.AddToxic("no-such-toxic", Both, 1, nil); err == nil || len(p.Toxics()) != 0 {
		t.Errorf("unknown toxic: %v, toxics %q", err, p.Toxics())
	}
	if _, err := p.Latency(Upstream, time.Microsecond, 0); err == nil {
		t.Error("a sub-millisecond latency was accepted")
	}
}
