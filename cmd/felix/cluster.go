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
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// defaultControlPlaneURL is felix-controlplane's default REST bind.
const defaultControlPlaneURL = "http://127.0.0.1:8443"

// clusterCommand is `felix cluster`: status (cluster_status.go) and stream create with a
// replication factor (docs/cli.md, "felix cluster").
func (a *app) clusterCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "A cluster's status and replicated streams (control plane and brokers)",
		Args: cobra.ArbitraryArgs, RunE: groupRunE}
	cp := new(string)
	cmd.PersistentFlags().StringVar(cp, "controlplane", a.env(defaultControlPlaneURL, "FELIX_CONTROLPLANE_URL"),
		"control-plane member REST URLs, comma-separated, tried in turn (FELIX_CONTROLPLANE_URL)")
	stream := &cobra.Command{Use: "stream", Short: "Replicated streams (admin API)", Args: cobra.ArbitraryArgs, RunE: groupRunE}
	stream.AddCommand(a.clusterStreamCreate())
	cmd.AddCommand(a.clusterStatusCommand(cp), stream)
	return cmd
}

// clusterStreamCreate is `felix cluster stream create STREAM [--shards N]
// [--replication-factor R] [--consistency Leader|Quorum]`: POST of the admin API's stream
// body plus replication_factor to the first --admin broker that answers, which forwards
// it to the control plane (docs/controlplane.md, "Admin writes"). The default factor is
// FELIX_REPLICATION_FACTOR (what `felix dev cluster --print-env` exports), else 1.
func (a *app) clusterStreamCreate() *cobra.Command {
	var (
		shards, rf  int
		consistency string
	)
	cmd := &cobra.Command{
		Use:   "create STREAM [--shards N] [--replication-factor R] [--consistency Leader|Quorum]",
		Short: "Create a stream with a replication factor (through a broker's admin API)",
		Args:  nameArgs(1, 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkRange("shards", int64(shards), 1, maxShardIndex+1); err != nil {
				return err
			}
			if err := checkRange("replication-factor", int64(rf), 1, 7); err != nil {
				return err
			}
			body := map[string]any{"stream": args[0], "shards": shards, "replication_factor": rf}
			if consistency != "" {
				body["consistency"] = consistency
			}
			path := "/v1/tenants/" + url.PathEscape(a.tenant) + "/namespaces/" + url.PathEscape(a.namespace) + "/streams"
			var got struct {
				Consistency       string `json:"consistency"`
				ReplicationFactor int    `json:"replication_factor"`
			}
			if err := a.adminPost(cmd.Context(), path, body, &got); err != nil {
				return fmt.Errorf("create stream %s: %w", args[0], err)
			}
			if err := a.waitLeadersOpen(cmd.Context(), args[0], shards); err != nil {
				return fmt.Errorf("created stream %s, but: %w", args[0], err)
			}
			a.done(map[string]any{"created": "stream", "stream": args[0], "shards": shards, "replication_factor": got.ReplicationFactor,
				"consistency": got.Consistency}, "created stream %s/%s/%s (%s, replication factor %d, %s)",
				a.tenant, a.namespace, args[0], plural(shards, "shard"), got.ReplicationFactor, got.Consistency)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&shards, "shards", 1, "number of shards")
	f.IntVar(&rf, "replication-factor", a.envInt("FELIX_REPLICATION_FACTOR", 1), "replicas of each shard, 1..7 (FELIX_REPLICATION_FACTOR)")
	f.StringVar(&consistency, "consistency", "", "Leader (ack once the leader committed) or Quorum (once a majority is durable); default the broker's")
	return cmd
}

// waitLeadersOpen waits, bounded by --timeout, until every --admin broker that answers
// /cluster/ownership holds every shard of the new stream in its ownership table, and each
// shard is open as leader on the broker the table names: a broker answers a create before
// its reconciler opened the shards (a publish in between is answered not_found), and
// before the other brokers' feeds brought the stream (a publish through one of them
// too). Leaders that are not among --admin are not waited for. A single node (no
// /cluster/ownership) does not wait.
func (a *app) waitLeadersOpen(parent context.Context, stream string, shards int) error {
	ctx, cancel := a.requestContext(parent)
	defer cancel()
	prefix := "stream/" + a.tenant + "/" + a.namespace + "/" + stream + "/"
	for {
		views := map[string]brokerOwnership{}
		for _, u := range a.adminURLs() {
			var v brokerOwnership
			if getJSON(ctx, u+"/cluster/ownership", 2*time.Second, &v) == nil && v.NodeID != "" {
				views[v.NodeID] = v
			}
		}
		if len(views) == 0 || streamReady(views, prefix, shards) {
			return nil
		}
		select {
		case <-ctx.Done():
			return withKind(ErrUnavailable, fmt.Errorf("its shards are not in every broker's table and open on their leaders yet: %w", ctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// streamReady reports whether every view's table holds the shards of prefix and each
// shard's leader, when its view is known, has it open as leader.
func streamReady(views map[string]brokerOwnership, prefix string, shards int) bool {
	for _, v := range views {
		if !leadersOpen(v.Ownership, views, prefix, shards) {
			return false
		}
	}
	return true
}

// leadersOpen reports whether the table rows hold every shard of prefix and each
// shard's leader, when its view is known, has it open as leader.
func leadersOpen(rows []ownershipRow, views map[string]brokerOwnership, prefix string, shards int) bool {
	seen := 0
	for _, r := range rows {
		if !strings.HasPrefix(r.Shard, prefix) {
			continue
		}
		seen++
		v, ok := views[r.Leader]
		if !ok {
			continue
		}
		open := false
		for _, o := range v.Open {
			open = open || (o.Shard == r.Shard && o.Role == "leader")
		}
		if !open {
			return false
		}
	}
	return seen == shards
}

// adminPost posts body as JSON to path on the first --admin URL that answers, with the
// resolved token, bounded by --timeout, and decodes a 2xx answer into out. Another status
// is an error with the broker's {code, message}, kind by status (404 not found, 401/403
// unauthorized, 503 unavailable, 400 usage; 409, already exists or refused, is a failure).
func (a *app) adminPost(parent context.Context, path string, body, out any) error {
	token, err := a.resolveToken()
	if err != nil {
		return err
	}
	ctx, cancel := a.requestContext(parent)
	defer cancel()
	base, err := a.adminBase(ctx)
	if err != nil {
		return err
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(data))
	if err != nil {
		return withKind(ErrUsage, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return doJSON(http.DefaultClient, req, out)
}

// doJSON sends req and decodes a 2xx JSON answer into out (when not nil); see adminPost
// for the errors.
func doJSON(hc *http.Client, req *http.Request, out any) error {
	resp, err := hc.Do(req)
	if err != nil {
		return withKind(ErrUnavailable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return withKind(ErrUnavailable, err)
	}
	if resp.StatusCode/100 != 2 {
		return httpError(req, resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: answer is not the expected JSON: %w", req.Method, req.URL, err)
	}
	return nil
}

// httpError is a non-2xx answer as an error of the CLI's kind for its status.
func httpError(req *http.Request, status int, body []byte) error {
	var e struct{ Code, Message string }
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		msg = e.Code + ": " + e.Message
	}
	err := fmt.Errorf("%s %s: HTTP %d: %s", req.Method, req.URL.Path, status, msg)
	switch {
	case status == http.StatusNotFound:
		return withKind(ErrNotFound, err)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return withKind(ErrUnauthorized, err)
	case status == http.StatusServiceUnavailable:
		return withKind(ErrUnavailable, err)
	case status == http.StatusBadRequest:
		return withKind(ErrUsage, err)
	}
	return err
}

// getJSON is GET url decoded into out, bounded by d.
func getJSON(ctx context.Context, u string, d time.Duration, out any) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return withKind(ErrUsage, err)
	}
	return doJSON(http.DefaultClient, req, out)
}

// getText is GET url's body, bounded by d.
func getText(ctx context.Context, u string, d time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	return string(data), err
}

// controlPlaneGet is GET path on the first member of members (--controlplane) that
// answers 200.
func (a *app) controlPlaneGet(ctx context.Context, members, path string, out any) error {
	var errs []error
	for _, u := range splitList(members) {
		u = strings.TrimRight(u, "/")
		if !strings.Contains(u, "://") {
			u = "http://" + u
		}
		err := getJSON(ctx, u+path, min(a.timeout, 5*time.Second), out)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return usagef("--controlplane is empty: want a URL[,URL...] (FELIX_CONTROLPLANE_URL)")
	}
	return withKind(ErrUnavailable, fmt.Errorf("no control-plane member answered %s: %w", path, errors.Join(errs...)))
}

// lagLabel is a shard key of the control plane ("stream/t/ns/name/N") in the form the
// broker's felix_replication_lag_records labels use ("stream:t/ns/name#N").
func lagLabel(key string) string {
	kind, rest, ok := strings.Cut(key, "/")
	i := strings.LastIndexByte(rest, '/')
	if !ok || i < 0 {
		return key
	}
	if _, err := strconv.Atoi(rest[i+1:]); err != nil {
		return key
	}
	return kind + ":" + rest[:i] + "#" + rest[i+1:]
}
