package clusterbed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"felix/cluster/meta"
	"felix/testbed/supervisor"
)

// requestBudget bounds one HTTP request of the bed.
const requestBudget = 10 * time.Second

var httpClient = &http.Client{Timeout: requestBudget}

// Call is CallJSON with the bed's admin token as the bearer.
func (b *Bed) Call(ctx context.Context, method, url string, body, out any) (int, string) {
	return CallJSON(ctx, method, url, b.Token, body, out)
}

// CallJSON sends a JSON request (body marshalled when not nil; token, when not "", as the
// bearer), bounded by requestBudget, and decodes a 2xx JSON answer into out when out is not
// nil. It returns the status and the raw answer; a transport error is status 0 with the
// error's text.
func CallJSON(ctx context.Context, method, url, token string, body, out any) (int, string) {
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(ctx, requestBudget)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			return 0, fmt.Sprintf("answer %s: %v", data, err)
		}
	}
	return resp.StatusCode, string(data)
}

// ControlPlane sends a request to the running members in turn until one answers with a
// status other than 0 or 503 (no leader yet), bounded by requestBudget each.
func (b *Bed) ControlPlane(ctx context.Context, method, path string, body, out any) (int, string) {
	code, text := 0, "no running member"
	for _, m := range b.Members {
		if !m.Proc.Running() {
			continue
		}
		if code, text = b.Call(ctx, method, m.URL()+path, body, out); code != 0 && code != http.StatusServiceUnavailable {
			return code, text
		}
	}
	return code, text
}

// Snapshot is the part of GET /v1/snapshot the tests read.
type Snapshot struct {
	Seq         uint64            `json:"seq"`
	Assignments []meta.Assignment `json:"assignments"`
}

// Snapshot reads the control plane's snapshot from a running member.
func (b *Bed) Snapshot(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	if code, text := b.ControlPlane(ctx, http.MethodGet, "/v1/snapshot", nil, &s); code != http.StatusOK {
		return s, fmt.Errorf("GET /v1/snapshot: %d %s", code, text)
	}
	return s, nil
}

// Assignments are the snapshot's assignments of the named stream or cache (kind "stream"
// or "cache"), indexed by shard.
func (b *Bed) Assignments(ctx context.Context, kind, name string) (map[uint32]meta.Assignment, error) {
	s, err := b.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	out := map[uint32]meta.Assignment{}
	for _, a := range s.Assignments {
		if a.Kind == kind && a.Name == name {
			out[a.Shard] = a
		}
	}
	return out, nil
}

// OpenShard is one shard open on a broker, from its GET /cluster/ownership.
type OpenShard struct {
	Shard      string `json:"shard"`
	Role       string `json:"role"`
	Generation uint64 `json:"generation"`
	Committed  uint64 `json:"committed"`
	Durable    uint64 `json:"durable_offset"`
}

// Ownership is broker br's open shards by shard key ("stream/t/ns/name/N").
func (b *Bed) Ownership(ctx context.Context, br *Broker) (map[string]OpenShard, error) {
	var v struct {
		Open []OpenShard `json:"open"`
	}
	if code, text := b.Call(ctx, http.MethodGet, br.OpsURL()+"/cluster/ownership", nil, &v); code != http.StatusOK {
		return nil, fmt.Errorf("%s /cluster/ownership: %d %s", br.ID, code, text)
	}
	out := map[string]OpenShard{}
	for _, o := range v.Open {
		out[o.Shard] = o
	}
	return out, nil
}

// Leader is the running member whose /metrics says felix_meta_raft_leader 1 (the highest
// term wins while a deposed leader has not noticed), or nil.
func (b *Bed) Leader(ctx context.Context) *Member {
	var best *Member
	var bestTerm uint64
	for _, m := range b.Members {
		if !m.Proc.Running() {
			continue
		}
		g, err := b.gauges(ctx, m)
		if err == nil && g["felix_meta_raft_leader"] == 1 && (best == nil || g["felix_meta_raft_term"] > bestTerm) {
			best, bestTerm = m, g["felix_meta_raft_term"]
		}
	}
	return best
}

// WaitLeader polls Leader every 20 ms until one is found, bounded by within.
func (b *Bed) WaitLeader(ctx context.Context, within time.Duration) (*Member, error) {
	deadline := time.Now().Add(within)
	for {
		if m := b.Leader(ctx); m != nil {
			return m, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("clusterbed: no member reported felix_meta_raft_leader 1 within %v", within)
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// gauges reads the unlabelled numeric series of m's /metrics.
func (b *Bed) gauges(ctx context.Context, m *Member) (map[string]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.Metrics+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s /metrics: %s", m.ID, resp.Status)
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if n, err := strconv.ParseUint(v, 10, 64); ok && err == nil {
			out[name] = n
		}
	}
	return out, sc.Err()
}

// KillMember SIGKILLs m and waits until it is reaped.
func (b *Bed) KillMember(ctx context.Context, m *Member) error {
	b.notePeak(m.ID, m.Proc.PeakRSS())
	_, err := m.Proc.Kill(ctx)
	return err
}

// RestartMember starts m's next run on the same ports and data dir (ready once /live answers).
func (b *Bed) RestartMember(ctx context.Context, m *Member) error {
	p, err := m.Proc.Restart(ctx, nil)
	if err == nil {
		m.Proc = p
	}
	return err
}

// KillBroker SIGKILLs br and waits until it is reaped.
func (b *Bed) KillBroker(ctx context.Context, br *Broker) error {
	b.notePeak(br.ID, br.Proc.PeakRSS())
	_, err := br.Proc.Kill(ctx)
	return err
}

// RestartBroker starts br's next run on the same ports, node id and data dir (ready once its
// ready file is written).
func (b *Bed) RestartBroker(ctx context.Context, br *Broker) error {
	p, err := br.Proc.Restart(ctx, nil)
	if err == nil {
		br.Proc = p
	}
	return err
}

// StopBroker sends SIGTERM to br and waits for its drain (bounded by drain, then SIGKILL).
func (b *Bed) StopBroker(ctx context.Context, br *Broker, drain time.Duration) (supervisor.ExitStatus, error) {
	return br.Proc.Terminate(ctx, drain)
}

func (b *Bed) notePeak(name string, rss int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.peak == nil {
		b.peak = map[string]int64{}
	}
	b.peak[name] = max(b.peak[name], rss)
}

// PeakRSS is the peak resident set (bytes) of each process over all its runs, by node id.
func (b *Bed) PeakRSS() map[string]int64 {
	for _, m := range b.Members {
		b.notePeak(m.ID, m.Proc.PeakRSS())
	}
	for _, br := range b.Brokers {
		b.notePeak(br.ID, br.Proc.PeakRSS())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.peak)
}
