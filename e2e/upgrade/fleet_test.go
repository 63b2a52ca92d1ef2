package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"felix/cluster/meta"
	"felix/testbed/supervisor"
)

// featureView is a row of the control plane's GET /v1/fleet/features.
type featureView struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
}

// enabled lists the control plane's enabled fleet features, sorted.
func (r *rig) enabled(ctx context.Context) []string {
	r.t.Helper()
	var views []featureView
	if code, out := call(ctx, r.t, "GET", r.cp.url+"/v1/fleet/features", "", nil, &views); code != 200 {
		r.t.Fatalf("GET /v1/fleet/features: %d %s", code, out)
	}
	var on []string
	for _, v := range views {
		if v.Enabled {
			on = append(on, v.Name)
		}
	}
	slices.Sort(on)
	return on
}

// admin runs the current felix-controlplane admin against the rig's control plane; it
// returns the combined output and the exit code.
func (r *rig) admin(ctx context.Context, args ...string) (string, int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, newBuild.controlPlane, append([]string{"admin", "--url", r.cp.url, "--token", r.cp.token}, args...)...)
	cmd.Env = withoutFelix(os.Environ())
	out, _ := cmd.CombinedOutput()
	return string(out), cmd.ProcessState.ExitCode()
}

// unchanged checks that nothing turned on: the control plane's enabled set is want, and
// every running broker's felix_broker_fleet_feature_enabled for generation_start is 0.
func (r *rig) unchanged(ctx context.Context, brokers []*brokerProc, want []string, step string) {
	r.t.Helper()
	if got := r.enabled(ctx); !slices.Equal(got, want) {
		r.t.Fatalf("%s: enabled fleet features %v, want %v (nothing turns on before a finalize)", step, got, want)
	}
	for _, b := range brokers {
		series := fmt.Sprintf("felix_broker_fleet_feature_enabled{feature=%q}", meta.FeatureGenerationStart)
		if v, ok := metric(ctx, r.t, b, series); ok && v != 0 {
			r.t.Fatalf("%s: %s (%s) %s = %v", step, b.name, b.built.name, series, v)
		}
	}
}

// TestFleetFeatures (seed "Fleet features: on only when an operator finalizes them", "Runbook:
// rolling out a fleet feature"): three brokers of the previous release on the current control
// plane and an RF3 stream. A rolling upgrade to the current build stopped half-way and
// reversed keeps every step serving and replicating, and changes no fleet feature. Both
// builds implement the same features, so a feature only a newer build has is played by a
// registration reporting generation_start (which neither build implements): the dry run names
// the brokers lacking it and the finalize is refused while they serve; once they are down it
// is finalized, and a broker of the previous release starting again gets 409 and exits.
func TestFleetFeatures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := newRig(t)
	if _, err := git(repoRoot, "diff", "--quiet", from.commit, "--", "broker/controlplane.go"); err == nil {
		t.Logf("broker/controlplane.go unchanged since %s", from.tag)
	}
	r.startControlPlane(ctx, newBuild)
	var brokers []*brokerProc
	for i := range 3 {
		brokers = append(brokers, r.startClusterBroker(ctx, oldBuild, i, true))
	}
	views := r.registered(ctx, brokers)
	for _, v := range views[1:] {
		if !slices.Equal(v.Features, views[0].Features) {
			t.Fatalf("brokers of one build report different features: %+v", views)
		}
	}
	waitFor(t, 30*time.Second, "the new cluster's features finalized", func() bool { return len(r.enabled(ctx)) > 0 })
	before := r.enabled(ctx)
	t.Logf("%s brokers report %v; the new cluster finalized %v", from.tag, views[0].Features, before)
	r.createStream(ctx, brokers[0], "orders", 3)
	r.replicated(ctx, brokers, "orders", "start", 2)
	r.rollHalfAndBack(ctx, brokers, before)
	r.finalizeRefusedThenDone(ctx, brokers, before)
}

// rollHalfAndBack upgrades brokers 0 and 1 to the current build one at a time, then
// reverses (1 then 0 back to the previous release); after each step every broker serves and
// the stream replicates to all three, and the enabled features are still before.
func (r *rig) rollHalfAndBack(ctx context.Context, brokers []*brokerProc, before []string) {
	r.t.Helper()
	steps := []struct {
		i int
		b build
	}{{0, newBuild}, {1, newBuild}, {1, oldBuild}, {0, oldBuild}}
	for n, s := range steps {
		r.swap(ctx, brokers[s.i], s.b)
		step := fmt.Sprintf("step %d (%s on %s)", n+1, brokers[s.i].name, s.b.name)
		r.replicated(ctx, brokers, "orders", fmt.Sprintf("step%d", n+1), 2)
		r.unchanged(ctx, brokers, before, step)
		r.t.Logf("%s: serving, replicated to all three, features %v", step, before)
	}
}

// finalizeRefusedThenDone registers a stand-in for a newer broker reporting generation_start
// as well, checks the dry run and the finalize are refused naming the serving brokers, stops
// them, finalizes once they are down, and starts broker 0 of the previous release again: 409,
// a non-zero exit naming the feature, never ready.
func (r *rig) finalizeRefusedThenDone(ctx context.Context, brokers []*brokerProc, before []string) {
	r.t.Helper()
	feats := append(slices.Clone(before), meta.FeatureGenerationStart)
	reg := map[string]any{"node_id": "newer.felix", "features": feats}
	if code, out := call(ctx, r.t, "POST", r.cp.url+"/v1/brokers", r.cp.token, reg, nil); code != 200 {
		r.t.Fatalf("register the stand-in newer broker: %d %s", code, out)
	}
	out, code := r.admin(ctx, "features")
	r.t.Logf("felix-controlplane admin features (exit %d):\n%s", code, out)
	out, code = r.admin(ctx, "features", "finalize", meta.FeatureGenerationStart, "--dry-run")
	if code == 0 || !strings.Contains(out, brokers[0].nodeID) {
		r.t.Fatalf("dry run with %s brokers serving: exit %d\n%s\nwant a refusal naming %s", from.tag, code, out, brokers[0].nodeID)
	}
	out, code = r.admin(ctx, "features", "finalize", meta.FeatureGenerationStart)
	if code == 0 {
		r.t.Fatalf("finalize with %s brokers serving: exit 0\n%s", from.tag, out)
	}
	r.t.Logf("finalize refused while %s brokers serve (exit %d): %s", from.tag, code, strings.TrimSpace(out))
	r.unchanged(ctx, brokers, before, "after the refused finalize")
	for _, b := range brokers {
		if _, err := b.proc.Terminate(ctx, 15*time.Second); err != nil {
			r.t.Fatal(err)
		}
	}
	waitFor(r.t, time.Minute, "the dry run passing once every broker is down", func() bool {
		_, code := r.admin(ctx, "features", "finalize", meta.FeatureGenerationStart, "--dry-run")
		return code == 0
	})
	if out, code := r.admin(ctx, "features", "finalize", meta.FeatureGenerationStart); code != 0 {
		r.t.Fatalf("finalize with every broker down: exit %d\n%s", code, out)
	}
	readyFile := brokers[0].proc.Spec().Ready.File
	if err := os.Remove(readyFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.t.Fatal(err)
	}
	p, err := r.sup.Restart(ctx, brokers[0].proc, func(s *supervisor.Spec) { s.Ready = supervisor.Ready{} })
	if err != nil {
		r.t.Fatal(err)
	}
	st, err := p.Wait(ctx)
	logs := p.Tail()
	_, statErr := os.Stat(readyFile)
	if err != nil || st.Success() || !strings.Contains(logs, "409") || !strings.Contains(logs, meta.FeatureGenerationStart) ||
		statErr == nil {
		r.t.Fatalf("%s broker after the finalize: %v %v, want a non-zero exit naming 409 and %s, no ready file (%v); logs:\n%s", from.tag, st,
			err, meta.FeatureGenerationStart, statErr, logs)
	}
	r.t.Logf("%s broker registering after the finalize: %v; %s", from.tag, st, lineWith(logs, "refused the registration"))
}

// lineWith is the first line of s containing sub.
func lineWith(s, sub string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}
