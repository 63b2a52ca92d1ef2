package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// adminClient calls the broker's admin HTTP API (docs/operations.md; broker.Admin: the
// control plane's REST paths of spec/auth.md §1) with a Bearer token.
type adminClient struct {
	base  string
	token string
	http  *http.Client
}

// apiError is an admin API failure: the HTTP status and the {"code","message"} body.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("admin API: HTTP %d", e.Status)
	}
	return e.Message
}

// kind maps the HTTP status to the CLI's failure kinds (exit.go).
func (e *apiError) kind() error {
	switch {
	case e.Status == http.StatusNotFound:
		return ErrNotFound
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		return ErrUnauthorized
	case e.Status == http.StatusBadRequest:
		return ErrUsage
	case e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable:
		return ErrUnavailable
	}
	return nil
}

func (a *app) admin() (*adminClient, error) {
	token, err := a.resolveToken()
	if err != nil {
		return nil, err
	}
	base := strings.TrimRight(a.adminURL, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	if _, err := url.Parse(base); err != nil {
		return nil, usagef("--admin %q: %v", a.adminURL, err)
	}
	return &adminClient{base: base, token: token, http: &http.Client{}}, nil
}

// do sends method path with body (JSON-encoded when non-nil) and decodes a 2xx answer
// into out (when non-nil). Failures carry a kind: *apiError statuses, and an unreachable
// broker as ErrUnavailable.
func (c *adminClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return usagef("admin request: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return withKind(ErrUnavailable, fmt.Errorf("admin API %s: %w", c.base, err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return withKind(ErrUnavailable, fmt.Errorf("admin API: read answer: %w", err))
	}
	if resp.StatusCode/100 != 2 {
		ae := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(data, ae) != nil || ae.Message == "" {
			ae.Message = fmt.Sprintf("admin API: HTTP %d %s", resp.StatusCode, strings.TrimSpace(string(data)))
		}
		return withKind(ae.kind(), ae)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("admin API: answer: %w", err)
		}
	}
	return nil
}

// nsPath is /v1/tenants/{t}/namespaces/{ns}/{kind} with escaped names.
func nsPath(tenant, ns, kind string, name ...string) string {
	p := "/v1/tenants/" + url.PathEscape(tenant) + "/namespaces/" + url.PathEscape(ns) + "/" + kind
	for _, n := range name {
		p += "/" + url.PathEscape(n)
	}
	return p
}

var errEmptyName = errors.New("names must not be empty")
