// Package metaclient is a broker's HTTP client of the control plane's REST API
// (issue 17 item 8; docs/controlplane.md, "The broker side"; seed
// ../shared/seeds/upgrades-and-compatibility.txt, "Control-plane REST"):
// broker registration and heartbeats, GET /v1/snapshot, the change feed's long
// poll GET /v1/changes?after=SEQ&wait=…, replica reports, and forwarding of
// admin writes.
//
// A Client knows one or more members' base URLs. A request goes to the member
// that last answered; a transport failure or a 503 with Retry-After (no
// leader, a follower that cannot reach it) moves it on to the next member in
// turn, so a
// follower's "the leader is elsewhere" answer is followed to whichever member
// leads. After a full round without an answer it backs off (exponential with
// full jitter from MinBackoff to MaxBackoff, at least the Retry-After the
// control plane asked for) on the injected clock, until the request's context
// ends. Answers: a 409 is *RefusedError (the control plane's code, message and
// detail: the reason a registration or finalize was refused), a 410 is
// *GoneError (errors.Is(err, ErrGone): reload the snapshot), other statuses
// *APIError. Readers ignore unknown JSON fields (additive REST).
package metaclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"felix/clock"
)

// Defaults of Config's zero fields.
const (
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 2 * time.Second
	// DefaultRequestTimeout bounds one HTTP exchange that is not a long poll.
	DefaultRequestTimeout = 10 * time.Second
	maxAnswer             = 64 << 20 // a snapshot of a large catalog
)

// Config configures a Client.
type Config struct {
	// URLs are the members' REST base URLs ("http://host:port"), tried in turn.
	URLs []string
	// Token is the control plane's admin token, sent as "Authorization: Bearer"
	// on every write ("" sends none: a control plane with FELIX_AUTH=off).
	Token string
	// HTTP carries the requests (http.DefaultClient when nil; give it no
	// overall Timeout shorter than a long poll's wait).
	HTTP *http.Client
	// Clock times the backoff (clock.Real() when nil).
	Clock clock.Clock
	// Jitter returns a number in [0, 1) scaling each backoff (rand.Float64
	// when nil).
	Jitter func() float64
	// MinBackoff and MaxBackoff bound the pause after a round of members
	// without an answer (DefaultMinBackoff, DefaultMaxBackoff).
	MinBackoff, MaxBackoff time.Duration
	// RequestTimeout bounds one exchange other than a long poll
	// (DefaultRequestTimeout).
	RequestTimeout time.Duration
}

// Client is a control-plane client; safe for concurrent use.
type Client struct {
	cfg  Config
	urls []string
	mu   sync.Mutex
	cur  int // the member that last answered
}

// ErrNoMembers is New's error for an empty URL list or a URL that is not http(s)://host.
var ErrNoMembers = errors.New("metaclient: no control-plane member URL")

// New checks cfg.URLs (each http:// or https:// with a host; trailing "/"
// dropped) and applies the defaults. Errors wrap ErrNoMembers.
func New(cfg Config) (*Client, error) {
	var urls []string
	for _, u := range cfg.URLs {
		u = strings.TrimRight(strings.TrimSpace(u), "/")
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("%w: %q: want http://host:port", ErrNoMembers, u)
		}
		urls = append(urls, u)
	}
	if len(urls) == 0 {
		return nil, ErrNoMembers
	}
	if cfg.HTTP == nil {
		cfg.HTTP = http.DefaultClient
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Jitter == nil {
		cfg.Jitter = rand.Float64
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	return &Client{cfg: cfg, urls: urls}, nil
}

// Member is the base URL of the member the next request goes to first.
func (c *Client) Member() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.urls[c.cur]
}

// Response is one answer of the control plane as received: status, headers
// and body (Forward's result).
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// request is one call: method, path with query, body, and the bound of one
// exchange (0: the client's RequestTimeout).
type request struct {
	method, path string
	body         []byte
	timeout      time.Duration
}

// do sends req to the members in turn until one answers other than a
// retryable 503, backing off after each full round, until ctx ends (then an error
// wrapping ErrUnavailable and naming the last failure).
func (c *Client) do(ctx context.Context, req request) (*Response, error) {
	var last error
	var retryAfter time.Duration
	for round := 0; ; round++ {
		start := c.start()
		for i := range c.urls {
			idx := (start + i) % len(c.urls)
			resp, err := c.once(ctx, c.urls[idx], req)
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w: %v (last: %v)", ErrUnavailable, ctx.Err(), last)
			}
			if err == nil && !retryable(resp) {
				c.setCur(idx)
				return resp, nil
			}
			if err != nil {
				last = err
			} else {
				last = answerError(resp)
				retryAfter = max(retryAfter, parseRetryAfter(resp.Header.Get("Retry-After")))
			}
		}
		if err := c.backoff(ctx, round, retryAfter); err != nil {
			return nil, fmt.Errorf("%w: %v (last: %v)", ErrUnavailable, err, last)
		}
		retryAfter = 0
	}
}

func (c *Client) start() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

func (c *Client) setCur(i int) {
	c.mu.Lock()
	c.cur = i
	c.mu.Unlock()
}

// retryable is a 503 with Retry-After: no leader, or a member that cannot reach
// it (a 503 without it, such as too few live brokers for a placement, is the
// control plane's answer).
func retryable(resp *Response) bool {
	return resp.Status == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != ""
}

// backoff waits min(MaxBackoff, MinBackoff·2^round) scaled by the jitter, and
// at least retryAfter (capped at MaxBackoff), on the client's clock.
func (c *Client) backoff(ctx context.Context, round int, retryAfter time.Duration) error {
	d := c.cfg.MinBackoff << min(round, 16)
	d = time.Duration(float64(min(d, c.cfg.MaxBackoff)) * c.cfg.Jitter())
	d = max(d, min(retryAfter, c.cfg.MaxBackoff))
	t := c.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// parseRetryAfter reads a Retry-After of delay-seconds (an HTTP date or a bad
// value is 0).
func parseRetryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// once is one HTTP exchange with member base.
func (c *Client) once(ctx context.Context, base string, req request) (*Response, error) {
	timeout := req.timeout
	if timeout <= 0 {
		timeout = c.cfg.RequestTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, base+req.path, body)
	if err != nil {
		return nil, err
	}
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if c.cfg.Token != "" && req.method != http.MethodGet {
		hr.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	resp, err := c.cfg.HTTP.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("metaclient: %s %s: reading the answer: %w", req.method, base+req.path, err)
	}
	if len(data) > maxAnswer {
		return nil, fmt.Errorf("metaclient: %s %s: answer larger than %d bytes", req.method, base+req.path, maxAnswer)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// call sends req and decodes a 2xx answer's JSON into out (nil: ignored);
// any other status is answerError's typed error.
func (c *Client) call(ctx context.Context, req request, out any) error {
	resp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	if resp.Status < 200 || resp.Status > 299 {
		return answerError(resp)
	}
	if out == nil || len(bytes.TrimSpace(resp.Body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return fmt.Errorf("metaclient: %s %s: answer: %w", req.method, req.path, err)
	}
	return nil
}

// jsonBody encodes v for a request body.
func jsonBody(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("metaclient: encoding the request: %w", err)
	}
	return data, nil
}
