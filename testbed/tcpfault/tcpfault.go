// Package tcpfault injects TCP faults between two test processes — the control plane's
// Raft peers, a REST client and its server — through Shopify's toxiproxy
// (github.com/Shopify/toxiproxy/v2) used as a library: no toxiproxy server process, no
// HTTP API, one in-process proxy per upstream.
//
// Start listens on 127.0.0.1:0 and forwards every accepted connection to one upstream
// (which must be on 127.0.0.0/8, ::1 or testbed/netns's 10.213.0.0/16). Toxics act per
// direction (Upstream: client → server bytes, Downstream: server → client bytes) on every
// connection, current and future: Latency (with jitter), Bandwidth, Timeout (data stops,
// the connection is closed after a while or never) and ResetPeer (TCP RST), plus AddToxic
// for toxiproxy's other types. Remove and RemoveAll take them off; Disable and Enable cut
// every connection and refuse new ones, then listen again on the same address. Toxiproxy
// does the proxying and the faults; this package only names the toxics and bounds the calls.
//
// docs/cluster-testing.md, "TCP faults".
package tcpfault

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Direction is which bytes of a proxied connection a toxic acts on. Combine with |.
type Direction uint8

const (
	// Upstream is the bytes the client sends to the upstream (requests).
	Upstream Direction = 1 << iota
	// Downstream is the bytes the upstream sends back to the client (responses).
	Downstream
	// Both is Upstream | Downstream: one toxic per direction.
	Both = Upstream | Downstream
)

// Errors of the package (toxiproxy's own, *toxiproxy.ApiError, are wrapped as they come).
var (
	// ErrNotLocal: the upstream is not on this machine's test addresses.
	ErrNotLocal = errors.New("tcpfault: upstream must be on 127.0.0.0/8, ::1 or 10.213.0.0/16")
	// ErrNoDirection: a toxic was asked for with no direction.
	ErrNoDirection = errors.New("tcpfault: no direction")
	// ErrUnknownToxic: Remove of a name this proxy did not add (or already removed).
	ErrUnknownToxic = errors.New("tcpfault: unknown toxic")
	// ErrClosed: the proxy was closed.
	ErrClosed = errors.New("tcpfault: closed")
)

// upstreamTargets are the only networks a proxy forwards to.
var upstreamTargets = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.213.0.0/16"),
}

// Proxy is one toxiproxy proxy: a listener on 127.0.0.1 forwarding to one upstream. Safe
// for concurrent use.
type Proxy struct {
	px       *toxiproxy.Proxy
	addr     string
	upstream string

	mu     sync.Mutex
	toxics []string // names added and not removed, in order
	seq    int
	closed bool
}

var proxySeq struct {
	sync.Mutex
	n int
}

// Start starts a proxy listening on 127.0.0.1 (a free port) that forwards each connection
// to upstream ("host:port"). The proxy has no toxic until one is added. Errors: ErrNotLocal
// (a host that is not an IP of 127.0.0.0/8, ::1 or 10.213.0.0/16, nor "localhost"), a
// malformed address, the listen error.
func Start(upstream string) (*Proxy, error) {
	if err := checkUpstream(upstream); err != nil {
		return nil, err
	}
	proxySeq.Lock()
	proxySeq.n++
	name := "tcpfault-" + strconv.Itoa(proxySeq.n)
	proxySeq.Unlock()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	px := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := px.Start(); err != nil {
		return nil, fmt.Errorf("tcpfault: listen: %w", err)
	}
	px.Lock()
	addr := px.Listen // the bound address, written by Start
	px.Unlock()
	return &Proxy{px: px, addr: addr, upstream: upstream}, nil
}

// StartForTest is Start for a test: a failure fails t, and the proxy is closed at t's cleanup.
func StartForTest(t testing.TB, upstream string) *Proxy {
	t.Helper()
	p, err := Start(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func checkUpstream(hostport string) error {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("tcpfault: upstream %q: %w", hostport, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("tcpfault: upstream %q: bad port", hostport)
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %q is not an IP address", ErrNotLocal, host)
	}
	for _, p := range upstreamTargets {
		if p.Contains(ip.Unmap()) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNotLocal, ip)
}

// Addr is the proxy's listen address ("127.0.0.1:port"): give it to the client in place of
// the upstream's.
func (p *Proxy) Addr() string { return p.addr }

// Upstream is the address every connection is forwarded to.
func (p *Proxy) Upstream() string { return p.upstream }

// Toxics lists the names of the toxics in place, in the order they were added.
func (p *Proxy) Toxics() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.toxics)
}

// Close stops the proxy: the listener and every proxied connection are closed. Idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.px.Stop()
	return nil
}

// Disable cuts the link: the listener and every proxied connection are closed (clients see
// their connection end), so new connections are refused until Enable. Toxics stay.
// Errors: ErrClosed.
func (p *Proxy) Disable() error {
	if err := p.usable(); err != nil {
		return err
	}
	p.px.Stop()
	return nil
}

// Enable listens again on the same address after Disable (a no-op when enabled). Errors:
// ErrClosed; the listen error (the port was taken meanwhile).
func (p *Proxy) Enable() error {
	if err := p.usable(); err != nil {
		return err
	}
	if err := p.px.Start(); err != nil && !errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
		return fmt.Errorf("tcpfault: listen again on %s: %w", p.addr, err)
	}
	return nil
}

func (p *Proxy) usable() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	return nil
}

// toxicJSON is the toxic body toxiproxy's collection decodes.
type toxicJSON struct {
	Name       string  `json:"name"`
	Type       string  `json:"type"`
	Stream     string  `json:"stream"`
	Toxicity   float32 `json:"toxicity"`
	Attributes any     `json:"attributes"`
}

// AddToxic adds a toxic of toxiproxy type typ ("latency", "bandwidth", "timeout",
// "reset_peer", "slow_close", "slicer", "limit_data") with its attributes (toxiproxy's JSON
// names and units) for each direction in dir, applied to a connection with probability
// toxicity (0 < toxicity ≤ 1; toxiproxy draws once per connection). It returns the new
// toxics' names, one per direction ("<typ>-<up|down>-<n>"). Errors: ErrNoDirection,
// ErrClosed, a bad toxicity, toxiproxy's refusal (unknown type, bad attributes); on an
// error no toxic of this call stays.
func (p *Proxy) AddToxic(typ string, dir Direction, toxicity float32, attrs any) ([]string, error) {
	if dir&Both == 0 {
		return nil, ErrNoDirection
	}
	if !(toxicity > 0 && toxicity <= 1) {
		return nil, fmt.Errorf("tcpfault: toxicity %v: want 0 < toxicity <= 1", toxicity)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	var names []string
	for _, d := range []struct {
		bit    Direction
		stream string
		short  string
	}{{Upstream, "upstream", "up"}, {Downstream, "downstream", "down"}} {
		if dir&d.bit == 0 {
			continue
		}
		p.seq++
		name := fmt.Sprintf("%s-%s-%d", typ, d.short, p.seq)
		body, err := json.Marshal(toxicJSON{Name: name, Type: typ, Stream: d.stream, Toxicity: toxicity, Attributes: attrs})
		if err == nil {
			_, err = p.px.Toxics.AddToxicJson(bytes.NewReader(body))
		}
		if err != nil {
			p.removeLocked(names)
			return nil, fmt.Errorf("tcpfault: add %s toxic: %w", typ, err)
		}
		names = append(names, name)
		p.toxics = append(p.toxics, name)
	}
	return names, nil
}

// Latency delays every chunk of data in dir by latency ± a uniform jitter (whole
// milliseconds: toxiproxy's unit). Returns the toxic names. Errors: as AddToxic; a
// negative or sub-millisecond latency or jitter.
func (p *Proxy) Latency(dir Direction, latency, jitter time.Duration) ([]string, error) {
	if latency < 0 || jitter < 0 || latency%time.Millisecond != 0 || jitter%time.Millisecond != 0 {
		return nil, fmt.Errorf("tcpfault: latency %v jitter %v: want whole milliseconds ≥ 0", latency, jitter)
	}
	return p.AddToxic("latency", dir, 1, map[string]int64{"latency": latency.Milliseconds(), "jitter": jitter.Milliseconds()})
}

// Bandwidth caps the data in dir to bytesPerSecond on each connection, rounded down to a
// whole kilobyte (1000 bytes) per second: toxiproxy's unit. Returns the toxic names.
// Errors: as AddToxic; bytesPerSecond < 1000.
func (p *Proxy) Bandwidth(dir Direction, bytesPerSecond int64) ([]string, error) {
	if bytesPerSecond < 1000 {
		return nil, fmt.Errorf("tcpfault: bandwidth %d B/s: want ≥ 1000", bytesPerSecond)
	}
	return p.AddToxic("bandwidth", dir, 1, map[string]int64{"rate": bytesPerSecond / 1000})
}

// Timeout stops all data in dir (it is dropped) and closes the connection after (whole
// milliseconds); after = 0 never closes it: the connection hangs until the toxic is
// removed. Returns the toxic names. Errors: as AddToxic; a negative or sub-millisecond after.
func (p *Proxy) Timeout(dir Direction, after time.Duration) ([]string, error) {
	if after < 0 || after%time.Millisecond != 0 {
		return nil, fmt.Errorf("tcpfault: timeout %v: want whole milliseconds ≥ 0", after)
	}
	return p.AddToxic("timeout", dir, 1, map[string]int64{"timeout": after.Milliseconds()})
}

// ResetPeer closes each connection after (whole milliseconds, 0 = at once) from its next
// data in dir, discarding that data. A connection made after the toxic was added is reset
// (TCP RST: toxiproxy sets SO_LINGER 0 when a connection's link starts, so the peer reads
// ECONNRESET); one made before is closed with a FIN (the peer reads EOF). Returns the toxic names.
// Errors: as AddToxic; a negative or sub-millisecond after.
func (p *Proxy) ResetPeer(dir Direction, after time.Duration) ([]string, error) {
	if after < 0 || after%time.Millisecond != 0 {
		return nil, fmt.Errorf("tcpfault: reset_peer %v: want whole milliseconds ≥ 0", after)
	}
	return p.AddToxic("reset_peer", dir, 1, map[string]int64{"timeout": after.Milliseconds()})
}

// Remove takes the named toxics off every connection; data a toxic holds (a latency's
// queue) is flushed on, data a timeout toxic dropped stays dropped. Errors: ErrUnknownToxic
// (the others are still removed), ErrClosed, toxiproxy's error.
func (p *Proxy) Remove(names ...string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	var errs []error
	for _, n := range names {
		if !slices.Contains(p.toxics, n) {
			errs = append(errs, fmt.Errorf("%w: %q", ErrUnknownToxic, n))
		}
	}
	if err := p.removeLocked(names); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RemoveAll takes every toxic off. Errors: ErrClosed, toxiproxy's error.
func (p *Proxy) RemoveAll() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	return p.removeLocked(slices.Clone(p.toxics))
}

// removeLocked removes the names this proxy holds; p.mu is held.
func (p *Proxy) removeLocked(names []string) error {
	var errs []error
	for _, n := range names {
		i := slices.Index(p.toxics, n)
		if i < 0 {
			continue
		}
		err := p.px.Toxics.RemoveToxic(context.Background(), n) // toxiproxy takes no deadline here
		if err != nil {
			errs = append(errs, fmt.Errorf("tcpfault: remove %s: %w", n, err))
			continue
		}
		p.toxics = slices.Delete(p.toxics, i, i+1)
	}
	return errors.Join(errs...)
}
