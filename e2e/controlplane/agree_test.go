package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// agreeWait bounds the wait for the members to reach one state after the workload stops.
const agreeWait = 30 * time.Second

// agree waits until every member's GET /v1/snapshot (its own state, not forwarded) is at
// one seq, and requires the bodies to be identical there: the replicas applied the same
// entries to the same state. It returns the seq. Errors: two members differing at one seq
// (both bodies quoted, cut to 2 KiB), or no common seq within within.
func (c *cluster) agree(a *api, within time.Duration) (uint64, error) {
	var seqs []uint64
	var last error
	err := poll(within, pollInterval, func(ctx context.Context) (bool, error) {
		var bodies [][]byte
		if bodies, seqs, last = c.snapshots(ctx, a); last != nil || !allEqual(seqs) {
			return false, nil
		}
		for i := 1; i < len(bodies); i++ {
			if !bytes.Equal(bodies[0], bodies[i]) {
				return false, fmt.Errorf("at seq %d %s and %s differ:\n%s\n%s", seqs[0], c.members[0].id,
					c.members[i].id, cut(bodies[0]), cut(bodies[i]))
			}
		}
		return true, nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return 0, fmt.Errorf("members at no common seq within %v (last: seqs %v, %v)", within, seqs, last)
	}
	if err != nil {
		return 0, err
	}
	return seqs[0], nil
}

// snapshots reads every member's /v1/snapshot body and its seq.
func (c *cluster) snapshots(ctx context.Context, a *api) ([][]byte, []uint64, error) {
	bodies, seqs := make([][]byte, len(c.members)), make([]uint64, len(c.members))
	for i, m := range c.members {
		ans := a.do(ctx, m, http.MethodGet, "/v1/snapshot", nil)
		if ans.err != nil || ans.status != http.StatusOK {
			return nil, seqs, fmt.Errorf("%s: %w", m.id, ans.error())
		}
		var s struct {
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal(ans.body, &s); err != nil {
			return nil, seqs, fmt.Errorf("%s: %w", m.id, err)
		}
		bodies[i], seqs[i] = ans.body, s.Seq
	}
	return bodies, seqs, nil
}

func allEqual(s []uint64) bool {
	for _, v := range s {
		if v != s[0] {
			return false
		}
	}
	return true
}

func cut(b []byte) string {
	if len(b) > 2048 {
		return string(b[:2048]) + "..."
	}
	return string(b)
}
