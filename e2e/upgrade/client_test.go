package upgrade

import (
	"context"
	"strings"
	"testing"
	"time"
)

// counterFound is the commit that made an unwritten counter absent (counter_value's
// additive found?: false, issue 25): the client protocol's newest difference.
const counterFound = "42164d5"

// TestClientProtocol: the old felix CLI against the new broker and the new CLI against the
// old broker (seed "Client protocol: negotiated, so order does not matter"): publish,
// subscribe, cache values and counters work both ways; a feature only the newer side has
// is absent (a typed answer, bounded, never a hang), and present between two current ones.
func TestClientProtocol(t *testing.T) {
	gate(t)
	if _, err := git(repoRoot, "diff", "--quiet", from.commit, "--", "proto/frame.go"); err == nil {
		t.Logf("%s and the current build define the same frame flags (proto/frame.go unchanged): "+
			"the negotiated intersection is every flag either way", from.tag)
	} else {
		t.Logf("proto/frame.go changed since %s: the intersection drops the newer flags", from.tag)
	}
	old := predates(t, counterFound, "counter_value's found?: false (an unwritten counter is absent)")
	for _, c := range []struct{ name, cliBuild, brokerBuild string }{
		{"old client, new broker", "old", "new"}, {"new client, old broker", "new", "old"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cli, srv := pick(c.cliBuild), pick(c.brokerBuild)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r := newRig(t)
			bp := r.startBroker(ctx, srv, "broker")
			clientBasics(ctx, r, cli, bp)
			// The newer feature: a counter never added to.
			out, errOut, code := r.felix(ctx, cli, bp, "cache", "counter", "c", "never")
			if old {
				if code != 0 || strings.TrimSpace(out) != "0" {
					t.Fatalf("%s client, %s broker: an unwritten counter: exit %d, stdout %q, stderr %q; want 0 and \"0\" "+
						"(the feature absent: one side predates %s)", cli.name, srv.name, code, out, errOut, counterFound)
				}
				t.Logf("%s client, %s broker: an unwritten counter reads 0, exit 0 (found? absent: the older side's answer)",
					cli.name, srv.name)
			} else if code != 3 {
				t.Fatalf("an unwritten counter: exit %d, stdout %q; want 3 (both sides have %s)", code, out, counterFound)
			}
			if srv.name == newBuild.name {
				// The same broker with the current client: the feature is there, so the check above can fail.
				if _, errOut, code := r.felix(ctx, newBuild, bp, "cache", "counter", "c", "never"); code != 3 ||
					!strings.Contains(errOut, "not found") {
					t.Fatalf("current client, current broker: an unwritten counter: exit %d %q, want 3 not found", code, errOut)
				}
			}
		})
	}
}

// pick maps "old"/"new" to the build.
func pick(which string) build {
	if which == "old" {
		return oldBuild
	}
	return newBuild
}

// clientBasics runs the commands both builds have through bp with build cli's felix: a
// stream created, three records published and read back in order, a cache value, a counter.
func clientBasics(ctx context.Context, r *rig, cli build, bp *brokerProc) {
	r.t.Helper()
	r.mustFelix(ctx, cli, bp, "stream", "create", "orders")
	r.publishN(ctx, cli, bp, "orders", "rec", 3)
	if got := r.mustFelix(ctx, cli, bp, "sub", "orders", "--from", "earliest", "--count", "3"); got != "rec-0\nrec-1\nrec-2\n" {
		r.t.Fatalf("%s client, %s broker: sub read %q", cli.name, bp.built.name, got)
	}
	r.mustFelix(ctx, cli, bp, "cache", "create", "c")
	r.mustFelix(ctx, cli, bp, "cache", "put", "c", "k", "v1")
	if got := r.mustFelix(ctx, cli, bp, "cache", "get", "c", "k"); got != "v1\n" {
		r.t.Fatalf("cache get: %q", got)
	}
	r.mustFelix(ctx, cli, bp, "cache", "incr", "c", "hits", "--by", "5")
	if got := r.mustFelix(ctx, cli, bp, "cache", "counter", "c", "hits"); got != "5\n" {
		r.t.Fatalf("cache counter: %q", got)
	}
	if _, _, code := r.felix(ctx, cli, bp, "cache", "get", "c", "missing"); code != 3 {
		r.t.Fatalf("cache get of a missing key: exit %d, want 3", code)
	}
}
