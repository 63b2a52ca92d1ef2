package broker

// The broker-internal transport of a Server (issue 16; seeds/internal-protocol.txt, "Why it
// is a separate protocol" and "The transport"; docs/internal-transport.md, "In the broker"):
// with FELIX_INTERNAL_BIND set, New binds a cluster/transport Listener (ALPN felix-internal/1)
// and a Pool for outgoing peers, Run serves the listener with a Dispatcher, and the drain
// closes them. Without the setting nothing here starts: a single node is unchanged.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/quic-go/quic-go"

	"felix/cluster/transport"
	"felix/netq"
)

// Internal is the broker-internal transport of a Server started with FELIX_INTERNAL_BIND,
// returned by Server.Internal (nil on a single node). The cluster work plugs in here:
// forwarding (ForwardPublish / ForwardCacheOp to a shard's leader) and replication
// (ReplicateRecords and its companions, Fence) register their server-side handlers on
// Dispatcher, by kind, and send to peers through Pool (Request; Pipeline for the ordered
// replication stream of a (peer, shard, log)). Register before peers can reach the kind: a
// request of a kind nobody registered is answered UnsupportedKind and counted in
// felix_internal_listener_unsupported_kind_total.
type Internal struct {
	// NodeID is FELIX_NODE_ID: this broker's identity, the DNS name peers check in TLS and
	// in HelloOk (transport.ValidNodeID).
	NodeID string
	// AdvertisedAddr is FELIX_INTERNAL_ADVERTISED_ADDR, the UDP host:port peers dial for this
	// broker (FELIX_INTERNAL_BIND when unset); a port 0 there is replaced by the bound port.
	AdvertisedAddr string
	// ClientAdvertisedAddr is FELIX_ADVERTISED_ADDR, the client address peers hand out in
	// NotLeader for this broker (FELIX_QUIC_BIND when unset).
	ClientAdvertisedAddr string
	// Mutual reports mTLS (all three FELIX_INTERNAL_TLS_* set); false is the unauthenticated
	// mode, warned about once at startup.
	Mutual bool
	// Dispatcher answers the requests peers send to this broker, one transport.Handler per
	// proto.Kind (Register); the listener writes each answer with the request's correlation id.
	Dispatcher *transport.Dispatcher
	// Pool carries this broker's requests to its peers (transport.Peer{NodeID, Addr}); closed
	// by the drain after the client connections, failing its waiters with ErrConnectionLost.
	Pool *transport.Pool

	addr net.Addr
}

// Addr is the bound UDP address of the internal listener (the port chosen with port 0).
func (in *Internal) Addr() net.Addr { return in.addr }

// internalTransport is the Server's running state of Internal.
type internalTransport struct {
	pub      Internal
	creds    *transport.Credentials // its storage identity is set at serveInternal
	listener *transport.Listener
	cancel   context.CancelFunc // ends Serve's context (the handlers')
	served   chan struct{}      // closed when Serve returned; nil before Run
}

// Internal returns the broker-internal transport, or nil when FELIX_INTERNAL_BIND is unset.
func (s *Server) Internal() *Internal {
	if s.internal == nil {
		return nil
	}
	return &s.internal.pub
}

// InternalAddr is the bound internal listener address (like QUICAddr), nil without
// FELIX_INTERNAL_BIND.
func (s *Server) InternalAddr() net.Addr {
	if s.internal == nil {
		return nil
	}
	return s.internal.pub.addr
}

// openInternal binds the internal listener and the pool when FELIX_INTERNAL_BIND is set,
// after the client listener (whose bound port it must not share: ErrConfig naming both
// settings). Load failures of FELIX_INTERNAL_TLS_* name the variable and path
// (transport.ErrTLSConfig). Nothing is served until Run.
func (s *Server) openInternal() error {
	cfg := &s.cfg.ClusterConfig
	if cfg.InternalBind == "" {
		return nil
	}
	clientPort := s.listener.Addr().(*net.UDPAddr).Port
	if p, ok := udpPort(cfg.InternalBind); ok && p != 0 && p == clientPort {
		return s.sharedPortError(p)
	}
	creds, err := transport.LoadCredentials(cfg.NodeID, cfg.InternalTLSFiles(), nil, s.log)
	if errors.Is(err, transport.ErrInvalidNodeID) {
		return fmt.Errorf("%w: FELIX_NODE_ID=%q: %v", ErrConfig, cfg.NodeID, err)
	}
	if err != nil {
		return fmt.Errorf("broker: internal transport: %w", err)
	}
	resetKey, err := internalResetKey(s.cfg.DataDir)
	if err != nil {
		return err
	}
	// Listen logs the unauthenticated-mode warning (creds.Warning) once, here.
	l, err := transport.Listen(cfg.InternalBind, creds, transport.Options{Logger: s.log, Metrics: s.metrics,
		StatelessResetKey: resetKey})
	if err != nil {
		return fmt.Errorf("broker: FELIX_INTERNAL_BIND=%s: %w", cfg.InternalBind, err)
	}
	if p := l.Addr().(*net.UDPAddr).Port; p == clientPort {
		l.Close()
		return s.sharedPortError(p)
	}
	pool, err := transport.NewPool(creds, transport.PoolOptions{Logger: s.log, Metrics: s.metrics})
	if err != nil {
		l.Close()
		return fmt.Errorf("broker: internal transport pool: %w", err)
	}
	advertised := advertisedAddr(cfg.InternalAdvertisedAddr, cfg.InternalBind, l.Addr().(*net.UDPAddr).Port)
	s.internal = &internalTransport{creds: creds, listener: l, pub: Internal{NodeID: cfg.NodeID, AdvertisedAddr: advertised,
		ClientAdvertisedAddr: cfg.AdvertisedAddr, Mutual: creds.Mutual(), Dispatcher: transport.NewDispatcher(),
		Pool: pool, addr: l.Addr()}}
	s.log.Info("internal transport listening", "addr", l.Addr().String(), "node_id", cfg.NodeID,
		"advertised", advertised, "alpn", netq.ALPNInternal, "mtls", creds.Mutual())
	return nil
}

// advertisedAddr is the address peers dial: addr, else bind, with a port 0 (never dialable)
// replaced by the bound port.
func advertisedAddr(addr, bind string, bound int) string {
	if addr == "" {
		addr = bind
	}
	if host, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
		return net.JoinHostPort(host, strconv.Itoa(bound))
	}
	return addr
}

func (s *Server) sharedPortError(port int) error {
	return fmt.Errorf("%w: FELIX_INTERNAL_BIND=%s shares port %d with FELIX_QUIC_BIND=%s (bound %s); the internal and client roles must bind different ports",
		ErrConfig, s.cfg.InternalBind, port, s.cfg.QUICBind, s.listener.Addr())
}

// serveInternal starts serving the internal listener with the Dispatcher (Run, before ready).
// First it gives the transport this broker's storage identity (seglog.BeginRun ran after the
// bind), which every handshake from here on carries (StorageHello/StorageHelloOk, issue 20
// gap 4): a leader attributes this broker's acknowledgements to it.
func (s *Server) serveInternal() {
	in := s.internal
	if in == nil {
		return
	}
	in.creds.SetStorageID(transport.StorageID(s.storageID))
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel, in.served = cancel, make(chan struct{})
	go func() {
		defer close(in.served)
		if err := in.listener.Serve(ctx, in.pub.Dispatcher.Handle); err != nil && !errors.Is(err, transport.ErrClosed) && ctx.Err() == nil {
			s.log.Error("internal transport stopped serving", "err", err)
		}
	}()
}

// stopAcceptingInternal is the drain's first internal step: no new peer connections; the
// ones up keep being served while the client connections drain.
func (s *Server) stopAcceptingInternal() {
	if s.internal != nil {
		_ = s.internal.listener.StopAccepting()
	}
}

// closeInternal closes the pool (its waiters fail ErrConnectionLost), then the listener (its
// connections close with CONNECTION_CLOSE, failing the peers' waiters; the handlers' context
// ends) and waits for Serve until deadline. It reports whether Serve returned in time (true
// when it never ran). Idempotent.
func (s *Server) closeInternal(deadline time.Time) bool {
	in := s.internal
	if in == nil {
		return true
	}
	_ = in.pub.Pool.Close()
	_ = in.listener.Close()
	if in.served == nil {
		return true
	}
	in.cancel()
	t := time.NewTimer(max(time.Until(deadline), 0))
	defer t.Stop()
	select {
	case <-in.served:
		return true
	case <-t.C:
		s.log.Error("internal transport handlers did not return within the drain budget")
		return false
	}
}

// internalReadyInfo adds the internal listener's address and node id to the ready file.
func (s *Server) internalReadyInfo(info *ReadyInfo) {
	if s.internal != nil {
		info.InternalAddr, info.NodeID = s.internal.pub.addr.String(), s.internal.pub.NodeID
	}
}

// internalResetKey is the internal listener's stateless-reset key: HMAC-SHA256 of the
// data dir's QUIC reset key (netq.LoadOrCreateResetKey, kept across restarts) with a
// label of its own, so the client and internal endpoints never share a key. A peer whose
// connection outlived this process (SIGKILL) is reset at its next packet to the
// restarted broker and redials, instead of sending into the dead connection until its
// idle timeout (a follower restarted under a leader went unreplicated that long).
func internalResetKey(dataDir string) (*quic.StatelessResetKey, error) {
	base, err := netq.LoadOrCreateResetKey(dataDir)
	if err != nil {
		return nil, fmt.Errorf("broker: internal stateless reset key: %w", err)
	}
	mac := hmac.New(sha256.New, base[:])
	mac.Write([]byte("felix-internal/1 stateless reset"))
	var key quic.StatelessResetKey
	copy(key[:], mac.Sum(nil))
	return &key, nil
}
