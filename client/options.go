package client

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"felix/proto"
)

// Option configures Dial. Options are applied after the environment defaults
// (FELIX_AUTH_TENANT, FELIX_AUTH_TOKEN; spec/config.md §6), so an explicit option wins.
type Option func(*config) error

// config is the resolved Dial configuration.
type config struct {
	tenant, namespace string
	token             string
	tlsConfig         *tls.Config
	fingerprint       string
	insecure          bool
	conns             int
	streamsPerConn    int
	maxFrame          uint32
	logger            *slog.Logger
	dialTimeout       time.Duration
	idleTimeout       time.Duration
	backoffMin        time.Duration
	backoffMax        time.Duration
	maxAttempts       int
	subQueue          int
	eventPending      int
	failover          []string // WithFailover: more broker addresses for the pool (failover.go)
	// afterFunc schedules the Publisher's linger timers (time.AfterFunc; a fake clock in
	// tests).
	afterFunc func(d time.Duration, f func()) interface{ Stop() bool }
}

func defaultConfig(getenv func(string) string) *config {
	c := &config{
		tenant:         "default",
		namespace:      "default",
		conns:          2,
		streamsPerConn: 2,
		maxFrame:       proto.DefaultMaxFrameBytes,
		logger:         slog.New(slog.DiscardHandler),
		dialTimeout:    10 * time.Second,
		idleTimeout:    DefaultIdleTimeout,
		backoffMin:     50 * time.Millisecond,
		backoffMax:     5 * time.Second,
		maxAttempts:    3,
		subQueue:       64,
		eventPending:   16384,
		afterFunc: func(d time.Duration, f func()) interface{ Stop() bool } {
			return time.AfterFunc(d, f)
		},
	}
	if v := getenv("FELIX_AUTH_TENANT"); v != "" {
		c.tenant = v
	}
	if v := getenv("FELIX_AUTH_TOKEN"); v != "" {
		c.token = v
	}
	return c
}

// WithToken sets the bearer token sent in every stream's auth frame (spec/auth.md). It
// overrides FELIX_AUTH_TOKEN.
func WithToken(token string) Option {
	return func(c *config) error { c.token = token; return nil }
}

// WithTokenFile reads the token from path (surrounding white space trimmed), e.g. the
// broker's <data>/admin.token. A missing or empty file is an error wrapping
// ErrInvalidArgument.
func WithTokenFile(path string) Option {
	return func(c *config) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("%w: token file: %v", ErrInvalidArgument, err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return fmt.Errorf("%w: token file %s is empty", ErrInvalidArgument, path)
		}
		c.token = t
		return nil
	}
}

// WithTenant sets the tenant id sent in auth and every request (default "default", or
// FELIX_AUTH_TENANT).
func WithTenant(tenant string) Option {
	return func(c *config) error { c.tenant = tenant; return nil }
}

// WithNamespace sets the namespace of every request (default "default").
func WithNamespace(ns string) Option {
	return func(c *config) error { c.namespace = ns; return nil }
}

// WithTLSConfig uses cfg to verify the broker (a CA-signed certificate). The SDK clones it
// and sets NextProtos to ["felix/1"] and MinVersion to TLS 1.3.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *config) error { c.tlsConfig = cfg; return nil }
}

// WithFingerprint pins the broker's certificate: fp is the lowercase hex SHA-256 of the
// leaf certificate's DER (64 hex digits; ':' separators and case are ignored), as printed
// in the broker's start-up log and ready file. Chain and host name are then not checked.
func WithFingerprint(fp string) Option {
	return func(c *config) error {
		n := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(fp), ":", ""))
		if len(n) != 64 || strings.Trim(n, "0123456789abcdef") != "" {
			return fmt.Errorf("%w: fingerprint must be 64 hex digits", ErrInvalidArgument)
		}
		c.fingerprint = n
		return nil
	}
}

// WithInsecureSkipVerify accepts any broker certificate. Development only: the connection
// is encrypted but not authenticated.
func WithInsecureSkipVerify() Option {
	return func(c *config) error { c.insecure = true; return nil }
}

// WithConnPool sets how many QUIC connections the client keeps to the broker (default 2,
// at least 1). Requests and subscriptions are spread over them round-robin.
func WithConnPool(n int) Option {
	return atLeastOne("connection pool size", n, func(c *config) *int { return &c.conns })
}

// WithStreamsPerConn sets how many authenticated request streams each connection keeps
// for publishes, cache and group requests (default 2, at least 1; spec/config.md §6).
func WithStreamsPerConn(n int) Option {
	return atLeastOne("streams per connection", n, func(c *config) *int { return &c.streamsPerConn })
}

// WithMaxFrameBytes sets the largest frame accepted from the broker and sent to it
// (FELIX_MAX_FRAME_BYTES; default 16 MiB).
func WithMaxFrameBytes(n uint32) Option {
	return func(c *config) error {
		if n < 64 {
			return fmt.Errorf("%w: max frame bytes %d", ErrInvalidArgument, n)
		}
		c.maxFrame = n
		return nil
	}
}

// WithLogger sets the logger for reconnects and dropped uncorrelated errors (default:
// discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l != nil {
			c.logger = l
		}
		return nil
	}
}

// WithReconnectBackoff sets the jittered exponential backoff between reconnect attempts:
// the n-th consecutive failure waits a random duration in [d/2, d] with
// d = min(max, min·2^n). Defaults 50 ms and 5 s.
func WithReconnectBackoff(min, max time.Duration) Option {
	return func(c *config) error {
		if min <= 0 || max < min {
			return fmt.Errorf("%w: backoff %v..%v", ErrInvalidArgument, min, max)
		}
		c.backoffMin, c.backoffMax = min, max
		return nil
	}
}

// WithMaxAttempts bounds how often a request that is safe to re-send (Get, Delete,
// CounterGet, Ack, DeadLetters, idempotent publishes) is sent after indeterminate answers
// (default 3, at least 1).
func WithMaxAttempts(n int) Option {
	return atLeastOne("max attempts", n, func(c *config) *int { return &c.maxAttempts })
}

// WithSubscriptionQueue sets how many event batches a subscription buffers before its
// reader stops reading (QUIC flow control then holds the broker back, whose drop_new
// policy turns a lasting backlog into a reported gap). Default 64.
func WithSubscriptionQueue(batches int) Option {
	return atLeastOne("subscription queue", batches, func(c *config) *int { return &c.subQueue })
}

// WithDialTimeout bounds one QUIC handshake (default 10 s).
func WithDialTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: dial timeout %v", ErrInvalidArgument, d)
		}
		c.dialTimeout = d
		return nil
	}
}

// DefaultIdleTimeout is the SDK's QUIC idle timeout (WithIdleTimeout).
const DefaultIdleTimeout = 5 * time.Second

// WithIdleTimeout sets how long a connection may go without receiving a packet before the
// SDK declares it dead (QUIC max_idle_timeout, RFC 9000 §10.1; the effective value is the
// smaller of the client's and the broker's, 30 s by default). The SDK sends a keep-alive
// PING every d/5, so a live but quiet connection (a subscriber or watch that only reads)
// is never idle, while one whose broker was killed (SIGKILL: no CONNECTION_CLOSE) is given
// up within about d + d/5 of the kill (the unanswered keep-alive, then d; quic-go counts
// the idle time from it) even when no stateless reset reaches the client (QUIC's probe timeout
// backs off exponentially while the broker is down, so its retransmissions may reach the
// restarted broker only tens of seconds later). Subscriptions and watches then
// re-subscribe on a new connection. Default DefaultIdleTimeout (5 s); at least 1 s, else
// ErrInvalidArgument.
func WithIdleTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Second {
			return fmt.Errorf("%w: idle timeout %v (at least 1 s)", ErrInvalidArgument, d)
		}
		c.idleTimeout = d
		return nil
	}
}

// atLeastOne is the Option setting the int field chosen by at to n, refusing
// n < 1 with ErrInvalidArgument naming what.
func atLeastOne(what string, n int, at func(*config) *int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: %s %d", ErrInvalidArgument, what, n)
		}
		*at(c) = n
		return nil
	}
}
