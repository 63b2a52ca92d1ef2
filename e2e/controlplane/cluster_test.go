package controlplane

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"felix/testbed/scenario"
	"felix/testbed/supervisor"
)

// member is one control-plane member: its id, addresses, data dir and current run.
type member struct {
	id                      string
	restAddr, raft, metrics string // 127.0.0.1:port each
	dir                     string
	proc                    *supervisor.Process
	cpuBefore               float64 // CPU seconds of the runs that were killed
}

// base is the member's REST base URL.
func (m *member) base() string { return "http://" + m.restAddr }

// cluster is a control plane of members started as processes by one supervisor; every
// data dir holds the same admin token.
type cluster struct {
	t       *testing.T
	sup     *supervisor.Supervisor
	members []*member
	token   string
}

// pollInterval is how often the cluster helpers re-check a condition.
const pollInterval = 20 * time.Millisecond

// httpClient is every test request's client: no proxy, 1 s dials, 8 s per request (more
// than the members' 5 s propose timeout, so a write's answer is awaited).
var httpClient = &http.Client{
	Timeout: 8 * time.Second,
	Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16,
		DialContext: (&net.Dialer{Timeout: time.Second}).DialContext},
}

// freeAddr is a 127.0.0.1 port below the ephemeral range (scenario.FreePort): a member is
// restarted on the same ports.
func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := scenario.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(p)
}

// startCluster starts n members (cp1..cpN) as one Raft group on free 127.0.0.1 ports,
// each ready once its /live answers, with extra ("K=V") added to every member's
// environment; it does not wait for a leader (waitLeader).
func startCluster(t *testing.T, n int, extra ...string) *cluster {
	t.Helper()
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, sup: supervisor.NewForTest(t), token: hex.EncodeToString(tok)}
	t.Cleanup(func() { keepLogs(t, c.sup.Dir()) })
	root := t.TempDir()
	var peers, urls []string
	for i := 1; i <= n; i++ {
		m := &member{id: fmt.Sprintf("cp%d", i), restAddr: freeAddr(t), raft: freeAddr(t), metrics: freeAddr(t)}
		m.dir = filepath.Join(root, m.id)
		if err := os.MkdirAll(m.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(m.dir, "admin-token"), []byte(c.token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		peers, urls = append(peers, m.id+"@"+m.raft), append(urls, m.id+"@"+m.base())
		c.members = append(c.members, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, m := range c.members {
		spec := supervisor.Spec{Name: m.id, Path: binary, Env: append([]string{
			"FELIX_CONTROLPLANE_NODE_ID=" + m.id, "FELIX_CONTROLPLANE_BIND=" + m.restAddr,
			"FELIX_CONTROLPLANE_RAFT_BIND=" + m.raft, "FELIX_CONTROLPLANE_METRICS_BIND=" + m.metrics,
			"FELIX_CONTROLPLANE_DATA_DIR=" + m.dir, "FELIX_CONTROLPLANE_PEERS=" + strings.Join(peers, ","),
			"FELIX_CONTROLPLANE_PEER_URLS=" + strings.Join(urls, ","),
		}, extra...), Ready: supervisor.Ready{URL: "http://" + m.metrics + "/live", Timeout: 30 * time.Second}}
		p, err := c.sup.Start(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		m.proc = p
	}
	return c
}

// running lists the members whose current run has not exited.
func (c *cluster) running() []*member {
	var out []*member
	for _, m := range c.members {
		if m.proc.Running() {
			out = append(out, m)
		}
	}
	return out
}

// raftGauges are the felix_meta_raft_* gauges of one member's /metrics.
type raftGauges struct {
	leader       bool
	term, commit uint64
	applied      uint64
}

// gauges reads m's /metrics. Errors: the request, a status other than 200.
func (m *member) gauges(ctx context.Context) (raftGauges, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.metrics+"/metrics", nil)
	if err != nil {
		return raftGauges{}, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return raftGauges{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return raftGauges{}, fmt.Errorf("%s /metrics: %s", m.id, resp.Status)
	}
	var g raftGauges
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseUint(v, 10, 64)
		if !ok || err != nil {
			continue
		}
		switch name {
		case "felix_meta_raft_leader":
			g.leader = n == 1
		case "felix_meta_raft_term":
			g.term = n
		case "felix_meta_raft_commit_index":
			g.commit = n
		case "felix_meta_raft_applied_index":
			g.applied = n
		}
	}
	return g, sc.Err()
}

// waitLeader polls the running members' /metrics until one reports
// felix_meta_raft_leader 1 (the highest term wins when a deposed leader has not noticed
// yet), bounded by within. Errors: no leader in time.
func (c *cluster) waitLeader(within time.Duration) (*member, raftGauges, error) {
	var best *member
	var bestG raftGauges
	err := poll(within, pollInterval, func(ctx context.Context) (bool, error) {
		for _, m := range c.running() {
			if g, err := m.gauges(ctx); err == nil && g.leader && (best == nil || g.term > bestG.term) {
				best, bestG = m, g
			}
		}
		return best != nil, nil
	})
	if err != nil {
		return nil, raftGauges{}, fmt.Errorf("no member reported felix_meta_raft_leader 1 within %v", within)
	}
	return best, bestG, nil
}

// waitApplied polls m's /metrics until its applied index reaches index, bounded by
// within. Errors: not reached in time (with the last gauges), m exited.
func (c *cluster) waitApplied(m *member, index uint64, within time.Duration) error {
	var last raftGauges
	var lastErr error
	err := poll(within, pollInterval, func(ctx context.Context) (bool, error) {
		if !m.proc.Running() {
			return false, fmt.Errorf("%s exited while catching up to index %d", m.id, index)
		}
		last, lastErr = m.gauges(ctx)
		return lastErr == nil && last.applied >= index, nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: applied index %d < %d after %v (%v)", m.id, last.applied, index, within, lastErr)
	}
	return err
}

// kill SIGKILLs m and waits until it is reaped.
func (c *cluster) kill(m *member) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), supervisor.KillWait)
	defer cancel()
	m.cpuBefore += cpuSeconds(m.proc.PID())
	if _, err := m.proc.Kill(ctx); err != nil {
		c.t.Fatal(err)
	}
}

// restart starts m's next run on the same ports and data dir, ready once /live answers.
func (c *cluster) restart(m *member) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := m.proc.Restart(ctx, nil)
	if err != nil {
		return err
	}
	m.proc = p
	return nil
}

// keepLogs copies the members' log files (every run of each, appended) into FELIX_CP_KEEP
// when it is set.
func keepLogs(t *testing.T, dir string) {
	keep := os.Getenv(envKeep)
	if keep == "" {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err == nil {
			err = os.WriteFile(filepath.Join(keep, t.Name()+"-"+filepath.Base(l)), b, 0o644)
		}
		if err != nil {
			t.Logf("keeping %s: %v", l, err)
		}
	}
}
