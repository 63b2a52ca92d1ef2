package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/quic-go/quic-go"

	"felix/client"
)

// dial connects the SDK to --server with the resolved credentials. --server (FELIX_SERVER)
// may list several brokers, comma-separated: they are tried in turn and the first that
// completes the handshake is used; with several each attempt is bounded by
// min(--timeout, perServerDial), so a stopped broker costs seconds, not --timeout (the
// SDK itself is given one address: docs/cli.md, "Several servers"). TLS trust, in
// order: --fingerprint pins the broker's certificate; --insecure accepts any; otherwise
// a loopback server (127.0.0.0/8, ::1, localhost: the broker's self-signed development
// default, traffic that never leaves the host) is accepted unverified and any other
// server is verified against the system roots (docs/cli.md, "TLS").
func (a *app) dial(ctx context.Context) (*client.Client, error) {
	if a.insecureErr != nil {
		return nil, a.insecureErr
	}
	servers := splitList(a.server)
	if len(servers) == 0 {
		return nil, usagef("--server is empty: want host:port[,host:port...] (FELIX_SERVER)")
	}
	for _, s := range servers {
		if err := checkServerAddr(s); err != nil {
			return nil, err
		}
	}
	token, err := a.resolveToken()
	if err != nil {
		return nil, err
	}
	timeout := a.timeout
	if len(servers) > 1 {
		timeout = min(timeout, perServerDial)
	}
	var errs []error
	for _, s := range servers {
		c, err := a.dialOne(ctx, s, token, timeout)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil || exitCode(err) != ExitUnavailable {
			return nil, err // not a broker that is down: the next one would answer the same
		}
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, withKind(ErrUnavailable, fmt.Errorf("no server of --server answered: %w", errors.Join(errs...)))
}

// perServerDial bounds each connect attempt when --server lists several brokers.
const perServerDial = 5 * time.Second

// dialOne connects to one server within timeout (dial).
func (a *app) dialOne(ctx context.Context, server, token string, timeout time.Duration) (*client.Client, error) {
	opts := []client.Option{
		client.WithTenant(a.tenant),
		client.WithNamespace(a.namespace),
		client.WithConnPool(1),
		client.WithDialTimeout(timeout),
	}
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	switch {
	case a.fingerprint != "":
		opts = append(opts, client.WithFingerprint(a.fingerprint))
	case a.insecure || isLoopback(server):
		opts = append(opts, client.WithInsecureSkipVerify())
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := client.Dial(ctx, server, opts...)
	if err != nil {
		err = classify(err)
		if exitCode(err) == ExitUnavailable && answersTCP(server) {
			return nil, fmt.Errorf("connect to %s: %w (is this the HTTP port? the client port is FELIX_QUIC_BIND (default :5000))", server, err)
		}
		return nil, fmt.Errorf("connect to %s: %w", server, err)
	}
	return c, nil
}

// splitList splits a comma-separated flag value, trimming spaces and dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// adminURLs are --admin's base URLs (FELIX_ADMIN_URL may list several, comma-separated),
// each with "http://" added when it has no scheme and no trailing "/".
func (a *app) adminURLs() []string {
	var out []string
	for _, u := range splitList(a.adminURL) {
		u = strings.TrimRight(u, "/")
		if !strings.Contains(u, "://") {
			u = "http://" + u
		}
		out = append(out, u)
	}
	return out
}

// adminBase is the admin API base URL admin commands use: the only --admin URL, or,
// when several are listed, the first whose GET /live answers within a second (any HTTP
// status: the API is there). None answering is ErrUnavailable naming each failure.
func (a *app) adminBase(ctx context.Context) (string, error) {
	urls := a.adminURLs()
	switch len(urls) {
	case 0:
		return "", usagef("--admin is empty: want a URL[,URL...] (FELIX_ADMIN_URL)")
	case 1:
		return urls[0], nil
	}
	hc := &http.Client{Timeout: time.Second}
	var errs []error
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/live", nil)
		if err != nil {
			return "", withKind(ErrUsage, fmt.Errorf("--admin %q: %w", u, err))
		}
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			return u, nil
		}
		errs = append(errs, err)
	}
	return "", withKind(ErrUnavailable, fmt.Errorf("no admin API of --admin answered: %w", errors.Join(errs...)))
}

// answersTCP reports whether something accepts a TCP connection at addr within 500 ms.
// The broker's client port is QUIC (UDP); a TCP listener there is most likely the admin
// HTTP port given as --server by mistake, which a QUIC dial only reports as a timeout.
func answersTCP(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// classify attaches the CLI's failure kind to an SDK error (exit.go): the SDK's sentinels
// (client/errors.go) and transport failures.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var (
		ne net.Error
		ae *client.AdminError
	)
	switch {
	case certificateRefused(err):
		// a pin mismatch or an untrusted certificate: bad configuration, retrying cannot help
		return withKind(ErrUnauthorized, err)
	case errors.Is(err, client.ErrInvalidArgument), errors.As(err, &ae) && ae.Status == http.StatusBadRequest:
		return withKind(ErrUsage, err)
	case errors.As(err, &ae) && (ae.Code == "overloaded" || ae.Code == "shard_unavailable"):
		// the shard limit (FELIX_MAX_SHARDS: HTTP 409 "overloaded", docs/cli.md exit 6)
		return withKind(ErrUnavailable, err)
	case errors.Is(err, client.ErrNotFound), errors.Is(err, client.ErrCursor):
		return withKind(ErrNotFound, err)
	case errors.Is(err, client.ErrUnauthorized):
		return withKind(ErrUnauthorized, err)
	case errors.Is(err, client.ErrIndeterminate):
		return withKind(ErrIndeterminate, err)
	case errors.Is(err, client.ErrStorageFailed), errors.As(err, &ae) && ae.Code == "storage_failed":
		return withKind(ErrStorageFailed, err)
	case errors.Is(err, client.ErrOverloaded), errors.Is(err, client.ErrShardUnavailable),
		errors.Is(err, client.ErrLeadershipLost), errors.Is(err, client.ErrNotLeader):
		return withKind(ErrUnavailable, err)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne):
		return withKind(ErrUnavailable, err)
	}
	return err
}

// certificateRefused reports whether err is this side's TLS handshake refusing the
// broker's certificate (a QUIC CRYPTO_ERROR we raised with a certificate alert: 42
// bad_certificate through 46 certificate_unknown, 48 unknown_ca) — a --fingerprint that
// does not match, or a certificate the system roots do not trust. docs/cli.md: exit 4.
func certificateRefused(err error) bool {
	var te *quic.TransportError
	if !errors.As(err, &te) || te.Remote || !te.ErrorCode.IsCryptoError() {
		return false
	}
	alert := uint64(te.ErrorCode) - 0x100
	return (alert >= 42 && alert <= 46) || alert == 48
}
