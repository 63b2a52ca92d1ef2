package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"felix/testbed/supervisor"
)

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// buildEcho go-builds testdata/udpecho into a temp dir.
func buildEcho(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "udpecho")
	cmd := exec.CommandContext(testCtx(t, 5*time.Minute), "go", "build", "-o", bin, "./testdata/udpecho")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// probe sends one datagram tagged tag on c and waits up to wait for its echo; replies to
// earlier probes are skipped. It reports whether the echo came back (and why not).
func probe(c *net.UDPConn, tag string, wait time.Duration) (bool, error) {
	deadline := time.Now().Add(wait)
	if _, err := c.Write([]byte(tag)); err != nil {
		return false, err // e.g. "no route to host" while the link is down
	}
	buf := make([]byte, 256)
	for {
		c.SetReadDeadline(deadline)
		n, err := c.Read(buf)
		if err != nil {
			return false, err
		}
		if string(buf[:n]) == tag {
			return true, nil
		}
	}
}

// waitReachable probes until an echo comes back, bounded by ctx.
func waitReachable(ctx context.Context, t *testing.T, c *net.UDPConn, phase string) {
	t.Helper()
	for i := 0; ; i++ {
		ok, err := probe(c, fmt.Sprintf("%s-%d", phase, i), 200*time.Millisecond)
		if ok {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: no echo after %d probes (last: %v)", phase, i+1, err)
		}
	}
}

func TestUDPEchoAcrossPartition(t *testing.T) {
	ns := NewForTest(t)
	t.Logf("namespace %s: %s (root %s), %s", ns.Name, ns.Addr, ns.HostAddr, ns.Subnet)
	bin := buildEcho(t)
	sup := supervisor.NewForTest(t) // after the namespace: its cleanup kills the echo first
	ready := filepath.Join(t.TempDir(), "ready.json")
	target := netip.AddrPortFrom(ns.Addr, 7777)
	path, args := ns.Wrap(bin, []string{"-addr", target.String(), "-ready", ready})
	ctx := testCtx(t, 2*time.Minute)
	if _, err := sup.Start(ctx, supervisor.Spec{Name: "udpecho", Path: path, Args: args, Ready: supervisor.Ready{File: ready}}); err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(target))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitReachable(testCtx(t, 10*time.Second), t, c, "before")

	if err := ns.LinkDown(ctx); err != nil {
		t.Fatal(err)
	}
	if !ns.Down() {
		t.Fatal("Down() false after LinkDown")
	}
	for i := range 5 { // 5 probes, 200 ms each: none may be answered
		if ok, err := probe(c, fmt.Sprintf("down-%d", i), 200*time.Millisecond); ok {
			t.Fatalf("echo answered while the link was down (probe %d)", i)
		} else if i == 0 {
			t.Logf("while down: %v", err)
		}
	}
	// The root's lookup for the namespace's address ends at the unreachable route, never at
	// the default route (no packet for 10.213/16 leaves the machine).
	if out, err := exec.CommandContext(ctx, "ip", "route", "get", ns.Addr.String()).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "No route to host") {
		t.Fatalf("ip route get %s while down: %v: %s", ns.Addr, err, out)
	}

	if err := ns.LinkUp(ctx); err != nil {
		t.Fatal(err)
	}
	waitReachable(testCtx(t, 10*time.Second), t, c, "after")
}

// The namespace reaches its /30 and nothing else: a lookup of any other address fails.
func TestNamespaceHasNoRouteOut(t *testing.T) {
	ns := NewForTest(t)
	ctx := testCtx(t, time.Minute)
	out, err := ns.Command(ctx, "ip", "-o", "-4", "addr", "show", "dev", ns.NSIf).CombinedOutput()
	if err != nil || !strings.Contains(string(out), ns.Addr.String()+"/30") {
		t.Fatalf("address inside: %v: %s", err, out)
	}
	out, err = ns.Command(ctx, "ip", "route", "get", ns.HostAddr.String()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "dev "+ns.NSIf) {
		t.Fatalf("route to the root side: %v: %s", err, out)
	}
	for _, dst := range []string{"192.0.2.1", "8.8.8.8", "10.213.255.254"} {
		out, err := ns.Command(ctx, "ip", "route", "get", dst).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "unreachable") {
			t.Errorf("route get %s inside the namespace: %v: %s", dst, err, out)
		}
	}
}

func TestTwoNamespacesGetTheirOwnSubnets(t *testing.T) {
	a, b := NewForTest(t), NewForTest(t)
	if a.Name == b.Name || a.Subnet.Overlaps(b.Subnet) || !Range.Contains(a.Addr) || !Range.Contains(b.Addr) {
		t.Fatalf("a %s %s, b %s %s", a.Name, a.Subnet, b.Name, b.Subnet)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat("/run/netns/" + a.Name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("namespace file after Close: %v", err)
	}
	if out, err := exec.Command("ip", "link", "show", a.HostIf).CombinedOutput(); err == nil {
		t.Fatalf("veth after Close: %s", out)
	}
	if out, _ := exec.Command("ip", "route", "show", a.Subnet.String()).CombinedOutput(); strings.TrimSpace(string(out)) != "" {
		t.Fatalf("route after Close: %s", out)
	}
	if err := a.LinkDown(testCtx(t, time.Minute)); !errors.Is(err, ErrClosed) {
		t.Fatalf("LinkDown after Close: %v", err)
	}
}

func TestCheckRoutes(t *testing.T) {
	ok := `default via 192.0.2.1 dev eth0
192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2
10.213.0.4/30 dev ftb1h proto kernel scope link src 10.213.0.5
unreachable 10.213.0.4/30 metric 4213
broadcast 10.213.0.7 dev ftb1h table local proto kernel scope link src 10.213.0.5
local 10.213.0.5 dev ftb1h table local proto kernel scope host src 10.213.0.5`
	if err := checkRoutes(ok); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"10.0.0.0/8 dev eth1 proto kernel", "10.213.7.0/24 via 192.0.2.9 dev eth0",
		"unreachable 10.213.0.0/16", "blackhole 10.213.1.0/30 metric 4213", "local 10.213.9.9 dev eth0 table local"} {
		if err := checkRoutes(ok + "\n" + bad); !errors.Is(err, ErrRangeInUse) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	n := newAt(16383)
	if n.Subnet.String() != "10.213.255.252/30" || n.HostAddr.String() != "10.213.255.253" || n.Addr.String() != "10.213.255.254" ||
		len(n.HostIf) > 15 {
		t.Fatalf("slot 16383: %+v", n)
	}
}
