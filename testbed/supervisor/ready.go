package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"time"
)

// DefaultReadyTimeout bounds a readiness wait when Ready.Timeout is 0: 30 s.
const DefaultReadyTimeout = 30 * time.Second

// readyInterval is how often readiness is re-checked.
const readyInterval = 10 * time.Millisecond

// readyTargets are the only hosts a Ready.URL may name: loopback and the private range the
// netns package gives its namespaces (testbed/netns, 10.213.0.0/16).
var readyTargets = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.213.0.0/16"),
}

// Ready says when a process is ready. With both fields set, both must hold.
type Ready struct {
	// File is ready once it exists, is not empty and, when it is a JSON object with a
	// non-zero "pid", names this process's pid (the broker's FELIX_READY_FILE: give the
	// same path in Spec.Env). A stale file is removed before the process starts.
	File string
	// URL is ready once GET URL answers 200 (e.g. "http://127.0.0.1:8080/ready"). Its host
	// must be an IP in 127.0.0.0/8, ::1 or 10.213.0.0/16 (testbed/netns), or "localhost";
	// no HTTP proxy is used; each try is bounded by 1 s.
	URL string
	// Timeout bounds the wait (0 = DefaultReadyTimeout); the caller's context bounds it too.
	Timeout time.Duration
}

// checkURL refuses a Ready.URL that could reach beyond this machine's test addresses.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("supervisor: ready URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("supervisor: ready URL %q: want http or https", raw)
	}
	if u.Hostname() == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return fmt.Errorf("supervisor: ready URL %q: host must be an IP address or localhost", raw)
	}
	for _, p := range readyTargets {
		if p.Contains(ip.Unmap()) {
			return nil
		}
	}
	return fmt.Errorf("supervisor: ready URL %q: %s is outside 127.0.0.0/8, ::1 and 10.213.0.0/16", raw, ip)
}

// readyClient never uses a proxy from the environment.
var readyClient = &http.Client{
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, DialContext: (&net.Dialer{Timeout: time.Second}).DialContext},
	Timeout:   time.Second,
}

// waitReady waits for p.spec.Ready, bounded by ctx and the Ready's timeout.
func (p *Process) waitReady(ctx context.Context) error {
	r := p.spec.Ready
	if r.File == "" && r.URL == "" {
		return nil
	}
	if r.URL != "" {
		if err := checkURL(r.URL); err != nil {
			return err
		}
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(readyInterval)
	defer tick.Stop()
	for {
		err := p.readyOnce(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%w (%s) before ready", ErrExited, p.status)
		case <-ctx.Done():
			return fmt.Errorf("%w (last check: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

var errNotYet = errors.New("not ready yet")

// readyOnce checks the ready file and the URL once; nil = ready.
func (p *Process) readyOnce(ctx context.Context) error {
	r := p.spec.Ready
	var data []byte
	if r.File != "" {
		b, err := os.ReadFile(r.File)
		if err != nil {
			return err
		}
		if len(b) == 0 {
			return fmt.Errorf("%w: %s is empty", errNotYet, r.File)
		}
		var info struct {
			PID int `json:"pid"`
		}
		if json.Unmarshal(b, &info) == nil && info.PID != 0 && info.PID != p.PID() {
			return fmt.Errorf("%w: %s names pid %d, not %d", errNotYet, r.File, info.PID, p.PID())
		}
		data = b
	}
	if r.URL != "" {
		if err := getOK(ctx, r.URL); err != nil {
			return err
		}
	}
	p.mu.Lock()
	p.readyData = data
	p.mu.Unlock()
	return nil
}

// getOK is one GET that must answer 200.
func getOK(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := readyClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s: %s", errNotYet, u, resp.Status)
	}
	return nil
}
