package client

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlogwriter"

	"felix/proto"
)

// ALPN is the application protocol the SDK offers in the TLS handshake (quic-go requires
// one on the client side; the broker's client role accepts "felix/1", docs/architecture.md
// netq).
const ALPN = "felix/1"

// ClientFlags are the FLX1 capability bits this SDK understands and offers in auth
// (spec/client-protocol.md §3, §4): every bit of proto.KnownFlags. Each side uses the
// intersection with the broker's server_flags; a broker answering plain "ok" is assumed to
// support proto.OriginalV1Flags only.
const ClientFlags = proto.KnownFlags

// Features are the JSON-only features of spec §8.0 this SDK offers in auth.
var Features = []string{
	proto.FeatureCacheDelete, proto.FeatureCounters, proto.FeatureGroups, proto.FeatureCacheWatch,
	proto.FeatureIdempotentPublish, proto.FeatureRedirects, proto.FeatureErrorCodes, proto.FeaturePublishers,
	proto.FeatureRoutingKeys,
}

// Client is a connection to one Felix broker: a pool of QUIC connections, each with a
// small pool of authenticated request streams, redialled with jittered backoff when they
// fail. It is safe for concurrent use. Close it when done.
type Client struct {
	cfg    *config
	addr   string
	tlsCfg *tls.Config
	slots  []*connSlot
	rr     atomic.Uint64
	reqID  atomic.Uint64
	caps   atomic.Pointer[Capabilities]
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	redirMu sync.Mutex
	redirs  map[string]*connSlot // one connection per redirect target (subscriptions, §8.9)
	owners  ownerCache           // shard owners learnt from not_leader (groups, watches; redirect_ops.go)
}

// Capabilities is what the broker negotiated on the latest authenticated stream (spec §4,
// §8.0).
type Capabilities struct {
	// Flags is the intersection of ClientFlags and the broker's server_flags, or
	// proto.OriginalV1Flags when the broker answered plain "ok".
	Flags uint16
	// Features is the intersection of Features and the broker's list.
	Features []string
}

// Has reports whether feature f (a proto.Feature* name) was negotiated.
func (c Capabilities) Has(f string) bool {
	for _, x := range c.Features {
		if x == f {
			return true
		}
	}
	return false
}

// Dial connects to the broker at addr (host:port, UDP) and authenticates one stream, so a
// wrong address, certificate or token fails here. ctx bounds the first connection only.
// Without WithTLSConfig, WithFingerprint or WithInsecureSkipVerify the system roots verify
// the broker. Errors: ErrInvalidArgument for bad options, ErrUnauthorized for a refused
// token, a transport error otherwise.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	cfg := defaultConfig(os.Getenv)
	for _, o := range opts {
		if err := o(cfg); err != nil {
			return nil, err
		}
	}
	if cfg.tenant == "" || cfg.namespace == "" {
		return nil, fmt.Errorf("%w: empty tenant or namespace", ErrInvalidArgument)
	}
	c := &Client{cfg: cfg, addr: addr, tlsCfg: clientTLS(cfg)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	for i := 0; i < cfg.conns; i++ {
		c.slots = append(c.slots, &connSlot{c: c, addr: addr, pool: true, bo: newBackoff(cfg.backoffMin, cfg.backoffMax)})
	}
	s, err := c.slots[0].dialOnce(ctx)
	if err == nil {
		_, err = s.session(ctx)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// clientTLS builds the handshake config: ALPN felix/1, TLS 1.3, and the chosen trust.
func clientTLS(cfg *config) *tls.Config {
	var t *tls.Config
	if cfg.tlsConfig != nil {
		t = cfg.tlsConfig.Clone()
	} else {
		t = &tls.Config{}
	}
	t.NextProtos = []string{ALPN}
	t.MinVersion = tls.VersionTLS13
	switch {
	case cfg.fingerprint != "":
		want := cfg.fingerprint
		t.InsecureSkipVerify = true // replaced by the pin check
		t.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return fmt.Errorf("%w: broker presented no certificate", ErrUnauthorized)
			}
			sum := sha256.Sum256(raw[0])
			if got := hex.EncodeToString(sum[:]); got != want {
				return fmt.Errorf("felix: broker certificate fingerprint %s does not match the pinned %s", got, want)
			}
			return nil
		}
	case cfg.insecure:
		t.InsecureSkipVerify = true
	}
	return t
}

// Tenant returns the tenant id every request carries.
func (c *Client) Tenant() string { return c.cfg.tenant }

// Namespace returns the namespace every request carries.
func (c *Client) Namespace() string { return c.cfg.namespace }

// Capabilities returns what the broker negotiated on the most recently authenticated
// stream.
func (c *Client) Capabilities() Capabilities {
	if p := c.caps.Load(); p != nil {
		return *p
	}
	return Capabilities{Flags: proto.OriginalV1Flags}
}

// Close ends every connection, subscription and pending request (pending requests fail
// with ErrIndeterminate). It is idempotent.
func (c *Client) Close() error {
	c.cancel()
	for _, s := range c.slots {
		s.close()
	}
	c.redirMu.Lock()
	for _, s := range c.redirs {
		s.close()
	}
	c.redirMu.Unlock()
	c.wg.Wait()
	return nil
}

// conn returns a live connection, round-robin over the pool, dialling (with backoff)
// until ctx ends.
func (c *Client) conn(ctx context.Context) (*conn, error) {
	i := c.rr.Add(1)
	return c.slots[i%uint64(len(c.slots))].get(ctx)
}

// session returns an authenticated request stream. A refusal of the auth frame (or an
// answer the SDK cannot read) is returned at once; a transport failure is retried on a
// fresh connection with jittered backoff until ctx ends.
func (c *Client) session(ctx context.Context) (*session, error) { return c.sessionOn(ctx, nil) }

// sessionOn is session on the connection of slot (nil = round-robin over the pool).
func (c *Client) sessionOn(ctx context.Context, slot *connSlot) (*session, error) {
	var bo backoff
	for attempt := 0; ; attempt++ {
		var cn *conn
		var err error
		if slot != nil {
			cn, err = slot.get(ctx)
		} else {
			cn, err = c.conn(ctx)
		}
		if err != nil {
			return nil, err
		}
		s, err := cn.session(ctx)
		if err == nil {
			return s, nil
		}
		if errors.Is(err, ErrRefused) || errors.Is(err, ErrProtocol) || ctx.Err() != nil || c.ctx.Err() != nil {
			return nil, err
		}
		if attempt == 0 {
			bo = newBackoff(c.cfg.backoffMin, c.cfg.backoffMax)
		}
		t := time.NewTimer(bo.next())
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-c.ctx.Done():
			t.Stop()
			return nil, ErrClosed
		}
	}
}

// nextID returns a process-unique request id for this client.
func (c *Client) nextID() uint64 { return c.reqID.Add(1) }

// roundTrip sends the request built by build (given its request id) and returns the
// answer. safe marks an operation that lands on the same state when applied twice
// (spec/seeds internal-protocol "Forwarded cache operation": Get and Delete): it is
// re-sent, with a new request id, after an indeterminate outcome, at most
// WithMaxAttempts times. An error message becomes a *ServerError, a not_leader a
// *NotLeaderError.
func (c *Client) roundTrip(ctx context.Context, safe bool, build func(id uint64) proto.Message) (proto.Message, error) {
	return c.roundTripOn(ctx, nil, safe, build)
}

// roundTripOn is roundTrip on the connection of slot (nil = any).
func (c *Client) roundTripOn(ctx context.Context, slot *connSlot, safe bool, build func(id uint64) proto.Message) (proto.Message, error) {
	for attempt := 1; ; attempt++ {
		s, err := c.sessionOn(ctx, slot)
		if err != nil {
			return nil, closedOr(c, err)
		}
		id := c.nextID()
		r, err := s.call(ctx, id, build(id))
		if err == nil {
			err = replyError(r)
			if err == nil {
				return r.msg, nil
			}
		}
		retry := errors.Is(err, errNotSent) || (safe && errors.Is(err, ErrIndeterminate))
		if !retry || attempt >= c.cfg.maxAttempts || ctx.Err() != nil || c.ctx.Err() != nil {
			if errors.Is(err, errNotSent) {
				err = fmt.Errorf("%w: request not sent", ErrShardUnavailable)
			}
			return nil, closedOr(c, err)
		}
		c.cfg.logger.Debug("felix: re-sending a request after an indeterminate outcome", "attempt", attempt, "err", err)
	}
}

// replyError turns an error-shaped answer into its typed error.
func replyError(r reply) error {
	switch m := r.msg.(type) {
	case *proto.Error:
		return serverError(m.Code, m.Message)
	case *proto.PublishError:
		return serverError(m.Code, m.Message)
	case *proto.NotLeader:
		return &NotLeaderError{Stream: m.Stream, Shard: m.Shard, Owner: m.Owner.NodeID, Address: m.Owner.Address, Generation: m.Generation}
	}
	if r.binary && r.ack.Status == proto.AckStatusError {
		code, text := proto.SplitErrorText(r.ackText)
		return serverError(code, text)
	}
	return nil
}

// closedOr reports ErrClosed once the client is closed.
func closedOr(c *Client, err error) error {
	if c.ctx.Err() != nil && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// requireFeature fails with ErrUnsupported when the broker did not negotiate f.
func (c *Client) requireFeature(ctx context.Context, f string) error {
	if _, err := c.session(ctx); err != nil {
		return err
	}
	if !c.Capabilities().Has(f) {
		return fmt.Errorf("%w: feature %q", ErrUnsupported, f)
	}
	return nil
}

// slotFor returns the connection slot for a broker address: the pool for the address the
// client dialled (nil), else one connection per redirect target, made on first use with
// the client's TLS settings and token (at most maxRedirectTargets; nil when all are live).
func (c *Client) slotFor(addr string) *connSlot {
	if addr == "" || addr == c.addr {
		return nil
	}
	c.redirMu.Lock()
	defer c.redirMu.Unlock()
	if c.redirs == nil {
		c.redirs = map[string]*connSlot{}
	}
	s := c.redirs[addr]
	if s == nil {
		s = c.newRedirectSlotLocked(addr) // bounded: maxRedirectTargets (redirect.go)
	}
	return s
}

// connSlot is one pooled connection and its reconnect schedule.
type connSlot struct {
	c      *Client
	addr   string
	mu     sync.Mutex
	cur    *conn
	bo     backoff
	notBef time.Time // no dial before this instant (backoff window)
	closed bool

	// evicted: dropped from Client.redirs (redirect.go); get fails errRedirectTargetEvicted.
	evicted bool
	// pool: one of Client.slots; after a failed dial it moves to the next WithFailover
	// address (failover.go). addr is then guarded by mu.
	pool bool
}

// get returns the live connection, dialling when there is none. A failed dial sets a
// jittered backoff window; get waits it out (bounded by ctx) before the next attempt.
func (s *connSlot) get(ctx context.Context) (*conn, error) {
	for {
		s.mu.Lock()
		if s.closed {
			ev := s.evicted
			s.mu.Unlock()
			if ev {
				return nil, errRedirectTargetEvicted
			}
			return nil, ErrClosed
		}
		if s.cur != nil && s.cur.alive() {
			cn := s.cur
			s.mu.Unlock()
			return cn, nil
		}
		wait := time.Until(s.notBef)
		s.mu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-s.c.ctx.Done():
				t.Stop()
				return nil, ErrClosed
			}
		}
		cn, err := s.dialOnce(ctx)
		if err == nil {
			return cn, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		s.c.cfg.logger.Warn("felix: dial failed", "err", err)
	}
}

// dialOnce makes one connection attempt and installs the result.
func (s *connSlot) dialOnce(ctx context.Context) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, s.c.cfg.dialTimeout)
	defer cancel()
	s.mu.Lock()
	addr := s.addr
	s.mu.Unlock()
	qc, err := quic.DialAddr(dctx, addr, s.c.tlsCfg, quicConfig(s.c.cfg))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.notBef = time.Now().Add(s.bo.next())
		s.failoverLocked(addr)
		return nil, fmt.Errorf("felix: dial %s: %w", addr, err)
	}
	if s.closed {
		_ = qc.CloseWithError(0, "client closed")
		return nil, ErrClosed
	}
	s.bo.reset()
	s.notBef = time.Time{}
	if s.cur != nil && s.cur.alive() {
		// Another caller's dial installed a live connection meanwhile: keep it (its
		// callers already use it) and drop ours. Closing it instead failed their requests
		// with "client closed" (found by the single-node-kill scenario).
		_ = qc.CloseWithError(0, "superseded by a concurrent dial")
		return s.cur, nil
	}
	if s.cur != nil {
		s.cur.close()
	}
	s.cur = newConn(s.c, qc)
	return s.cur, nil
}

// quicConfig is the SDK's transport configuration. The keep-alive period is a fifth of
// the idle timeout: a subscriber sends nothing of its own, and without frequent PINGs a
// broker killed with SIGKILL went unnoticed until the next 10 s keep-alive, whose lost
// probes then backed off exponentially (found by a new-user trial: subscriptions silent for
// 10–40 s after a broker restart). A PING reaching the restarted broker is answered with
// a stateless reset (netq.LoadOrCreateResetKey); if none does, the idle timeout ends the
// connection.
func quicConfig(cfg *config) *quic.Config {
	return &quic.Config{
		MaxIncomingUniStreams: 4096,
		MaxIdleTimeout:        cfg.idleTimeout,
		KeepAlivePeriod:       cfg.idleTimeout / 5,
		Tracer:                quicTracer,
	}
}

// quicTracer traces the SDK's QUIC connections when set (nil: untraced); the benchmarks
// count the packets sent per request with it (bench_packets_test.go).
var quicTracer func(ctx context.Context, isClient bool, connID quic.ConnectionID) qlogwriter.Trace

func (s *connSlot) close() {
	s.mu.Lock()
	s.closed = true
	cur := s.cur
	s.mu.Unlock()
	if cur != nil {
		cur.close()
	}
}
