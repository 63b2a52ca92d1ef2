// Package netns gives a test process a network of its own: a Linux network namespace joined
// to the root namespace by a veth pair on a private /30 out of 10.213.0.0/16, whose link can
// be taken down and up (a whole-node partition) and which is torn down at cleanup.
//
// Addresses: namespace i (0 ≤ i < 16384) owns 10.213.0.0/16's i-th /30; the root side of its
// veth has the /30's first host address (HostAddr) and the namespace side the second (Addr).
// Traffic can only ever reach addresses inside the namespaces a test created: the namespace
// has no route but its /30 (and its own loopback), and the root namespace holds an
// "unreachable" route for the /30 (metric UnreachableMetric) under the veth's connected route,
// so that while the link is down the root's default route never carries a packet for the
// namespace anywhere else. New refuses to run when some other route of the root namespace
// covers part of 10.213.0.0/16.
//
// Everything goes through iproute2 (`ip netns add/exec/del`, `ip link`, `ip addr`, `ip route`)
// run with os/exec, each command bounded by CommandTimeout. Needs root (CAP_SYS_ADMIN,
// CAP_NET_ADMIN). docs/cluster-testing.md, "Network namespaces".
package netns

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Range is the private range every namespace's /30 comes from.
var Range = netip.MustParsePrefix("10.213.0.0/16")

// UnreachableMetric is the metric of the root namespace's "unreachable" route for each
// namespace's /30 (and the mark by which New tells its own routes from anyone else's).
const UnreachableMetric = 4213

// CommandTimeout bounds every ip command.
const CommandTimeout = 30 * time.Second

// namePrefix starts every namespace and interface name ("ftb" = felix test bed).
const namePrefix = "ftb"

// slots is the number of /30s in Range.
const slots = 1 << 14

// Errors of the package.
var (
	// ErrRangeInUse: a route of the root namespace that is not this package's covers part
	// of Range, so its addresses would not be private to the test's namespaces.
	ErrRangeInUse = errors.New("netns: 10.213.0.0/16 is routed by something else")
	// ErrNoSlot: every /30 tried was taken (by namespaces of other test processes).
	ErrNoSlot = errors.New("netns: no free /30 in 10.213.0.0/16")
	// ErrClosed: the namespace was torn down.
	ErrClosed = errors.New("netns: closed")
)

// Namespace is one network namespace with its veth pair. Safe for concurrent use.
type Namespace struct {
	Name     string       // the `ip netns` name, "ftb<i>"
	HostIf   string       // the veth end in the root namespace, "ftb<i>h"
	NSIf     string       // the veth end inside, "ftb<i>n"
	Subnet   netip.Prefix // the /30
	HostAddr netip.Addr   // the root side's address (first host of Subnet)
	Addr     netip.Addr   // the namespace side's address (second host): where its servers listen

	mu     sync.Mutex
	down   bool
	closed bool
}

// ip runs `ip args...` bounded by ctx and CommandTimeout; the error quotes its output.
func ip(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("netns: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

var nextSlot struct {
	sync.Mutex
	n int
}

// New creates a namespace on a free /30 of Range (trying slots from a per-process starting
// point; `ip netns add` of an existing name fails, which is what claims a slot among test
// processes), its veth pair with both ends up and addressed, the namespace's loopback up,
// and the root's unreachable route; it returns once both ends are operationally up.
// Errors: ErrRangeInUse, ErrNoSlot, an ip command's failure (not root: "Operation not
// permitted"), ctx's error. On an error nothing of the attempt is left behind.
func New(ctx context.Context) (*Namespace, error) {
	if err := checkRange(ctx); err != nil {
		return nil, err
	}
	nextSlot.Lock()
	start := (os.Getpid()*97 + nextSlot.n) % slots
	nextSlot.n++
	nextSlot.Unlock()
	var last error
	for try := 0; try < 64; try++ {
		n := newAt((start + try*131) % slots)
		if _, err := ip(ctx, "netns", "add", n.Name); err != nil {
			last = err
			if ctx.Err() != nil || !strings.Contains(err.Error(), "exists") {
				return nil, err
			}
			continue // another process's namespace, or a stale one
		}
		err := n.setup(ctx)
		if err == nil {
			return n, nil
		}
		n.teardown()
		if ctx.Err() != nil || !strings.Contains(err.Error(), "exists") {
			return nil, err
		}
		last = err
	}
	return nil, fmt.Errorf("%w (last: %v)", ErrNoSlot, last)
}

// newAt describes (does not create) the namespace of slot i.
func newAt(i int) *Namespace {
	base := Range.Addr().As4()
	off := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	off += uint32(i) * 4
	addr := func(k uint32) netip.Addr {
		v := off + k
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	name := namePrefix + strconv.Itoa(i)
	return &Namespace{Name: name, HostIf: name + "h", NSIf: name + "n",
		Subnet: netip.PrefixFrom(addr(0), 30), HostAddr: addr(1), Addr: addr(2)}
}

// setup makes the veth pair, addresses, routes and waits for the link.
func (n *Namespace) setup(ctx context.Context) error {
	host := n.HostAddr.String() + "/30"
	inner := n.Addr.String() + "/30"
	steps := [][]string{
		{"link", "add", n.HostIf, "type", "veth", "peer", "name", n.NSIf, "netns", n.Name},
		{"addr", "add", host, "dev", n.HostIf},
		{"route", "replace", "unreachable", n.Subnet.String(), "metric", strconv.Itoa(UnreachableMetric)},
		{"link", "set", n.HostIf, "up"},
		{"-n", n.Name, "link", "set", "lo", "up"},
		{"-n", n.Name, "addr", "add", inner, "dev", n.NSIf},
		{"-n", n.Name, "link", "set", n.NSIf, "up"},
	}
	for _, s := range steps {
		if _, err := ip(ctx, s...); err != nil {
			return err
		}
	}
	return n.waitUp(ctx)
}

// checkRange refuses a root namespace where a route that is not this package's covers part
// of Range.
func checkRange(ctx context.Context) error {
	out, err := ip(ctx, "-o", "-4", "route", "show", "table", "all")
	if err != nil {
		return err
	}
	return checkRoutes(out)
}

// checkRoutes is checkRange over the output of `ip -o -4 route show table all`.
func checkRoutes(out string) error {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		kind := "unicast"
		if _, isType := routeTypes[f[0]]; isType {
			kind, f = f[0], f[1:]
		}
		if len(f) == 0 || f[0] == "default" {
			continue // the default route is what the unreachable routes shadow
		}
		p, err := netip.ParsePrefix(f[0])
		if err != nil {
			a, aerr := netip.ParseAddr(f[0])
			if aerr != nil {
				continue
			}
			p = netip.PrefixFrom(a, 32)
		}
		if !p.Overlaps(Range) || ours(kind, f) {
			continue
		}
		return fmt.Errorf("%w: %q", ErrRangeInUse, strings.TrimSpace(line))
	}
	return nil
}

var routeTypes = map[string]struct{}{"unicast": {}, "local": {}, "broadcast": {}, "multicast": {},
	"anycast": {}, "unreachable": {}, "blackhole": {}, "prohibit": {}, "throw": {}, "nat": {}}

// ours reports whether a route (its type and its fields after the type) is one New makes:
// on a "ftb…" device, or unreachable with UnreachableMetric.
func ours(kind string, f []string) bool {
	for i := 0; i+1 < len(f); i++ {
		switch {
		case f[i] == "dev" && strings.HasPrefix(f[i+1], namePrefix):
			return true
		case kind == "unreachable" && f[i] == "metric" && f[i+1] == strconv.Itoa(UnreachableMetric):
			return true
		}
	}
	return false
}
