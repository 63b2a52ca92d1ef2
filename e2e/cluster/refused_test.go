package cluster

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"felix/cluster/meta"
)

// A broker the control plane refuses at registration (the fleet finalized a feature this
// build does not implement: generation_start, reported by an earlier broker and finalized
// by the new-cluster rule) logs the control plane's reason and exits non-zero without
// becoming ready.
func TestRefusedBrokerExitsNonZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := startControlPlane(ctx, t)
	reg := map[string]any{"node_id": "old.felix", "features": []string{meta.FeatureGenerationStart}}
	if code, out := call(ctx, t, "POST", f.cpURL+"/v1/brokers", f.token, reg, nil); code != http.StatusOK {
		t.Fatalf("register old.felix: %d %s", code, out)
	}
	waitFor(t, 30*time.Second, "generation_start finalized by the new-cluster rule", func() bool {
		var views []featureView
		call(ctx, t, "GET", f.cpURL+"/v1/fleet/features", "", nil, &views)
		return slices.Contains(views, featureView{Name: meta.FeatureGenerationStart, Enabled: true})
	})
	b := f.spawnBroker(ctx, 0, false)
	st, err := b.proc.Wait(ctx)
	if err != nil || st.Success() || st.Signal != 0 {
		t.Fatalf("the refused broker: %v %v, want a non-zero exit", st, err)
	}
	logs := b.proc.Tail()
	if !strings.Contains(logs, "refused this broker's registration") || !strings.Contains(logs, "generation_start") ||
		strings.Contains(logs, "broker ready") {
		t.Fatalf("exit %v; logs:\n%s", st, logs)
	}
	t.Logf("refused broker: %v", st)
}
