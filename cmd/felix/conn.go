package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"felix/client"
)

// dial connects the SDK to --server with the resolved credentials. TLS trust, in order:
// --fingerprint pins the broker's certificate; --insecure accepts any; otherwise a
// loopback server (127.0.0.0/8, ::1, localhost: the broker's self-signed development
// default, traffic that never leaves the host) is accepted unverified and any other
// server is verified against the system roots (docs/cli.md, "TLS").
func (a *app) dial(ctx context.Context) (*client.Client, error) {
	if a.insecureErr != nil {
		return nil, a.insecureErr
	}
	if err := checkServerAddr(a.server); err != nil {
		return nil, err
	}
	token, err := a.resolveToken()
	if err != nil {
		return nil, err
	}
	opts := []client.Option{
		client.WithTenant(a.tenant),
		client.WithNamespace(a.namespace),
		client.WithConnPool(1),
		client.WithDialTimeout(a.timeout),
	}
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	switch {
	case a.fingerprint != "":
		opts = append(opts, client.WithFingerprint(a.fingerprint))
	case a.insecure || isLoopback(a.server):
		opts = append(opts, client.WithInsecureSkipVerify())
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	c, err := client.Dial(ctx, a.server, opts...)
	if err != nil {
		err = classify(err)
		if exitCode(err) == ExitUnavailable && answersTCP(a.server) {
			return nil, fmt.Errorf("connect to %s: %w (is this the HTTP port? the client port is FELIX_QUIC_BIND (default :5000))", a.server, err)
		}
		return nil, fmt.Errorf("connect to %s: %w", a.server, err)
	}
	return c, nil
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
