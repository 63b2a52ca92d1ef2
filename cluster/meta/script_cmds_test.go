package meta

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cockroachdb/datadriven"
)

func (h *harness) cmdRegister(d *datadriven.TestData) string {
	c := &RegisterBroker{NodeID: pos(d), StorageID: arg(d, "storage", "sid-"+pos(d)),
		ClientAddr: pos(d) + ":4433", InternalAddr: pos(d) + ":4434", Features: list(d, "features"),
		MaxLevel: BuildMaxLevel, AtMs: ms(d, "at")}
	if v := arg(d, "quorum-reads", ""); v != "" {
		c.Settings = map[string]string{"FELIX_QUORUM_READS": v}
	}
	if v := arg(d, "internal-fence", ""); v != "" {
		if c.Settings == nil {
			c.Settings = map[string]string{}
		}
		c.Settings["FELIX_INTERNAL_FENCE"] = v
	}
	c.Generations = gens(d)
	res, out := h.propose(c)
	if out != "" {
		return out
	}
	b := res.Value.(Broker)
	return h.okOr("", "broker %s incarnation=%d storage=%q features=%v enabled=%v",
		b.NodeID, b.Incarnation, b.StorageID, b.Features, featureNames(h.fsm.state))
}

// gens parses gens=(shardkey=N,...).
func gens(d *datadriven.TestData) map[string]uint64 {
	var out map[string]uint64
	for _, g := range list(d, "gens") {
		k, v, _ := strings.Cut(g, "=")
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			scriptFail(d, "gens: %v", err)
		}
		if out == nil {
			out = map[string]uint64{}
		}
		out[k] = n
	}
	return out
}

func featureNames(s *State) []string {
	var out []string
	for _, f := range s.Enabled() {
		out = append(out, f.Name)
	}
	return out
}

func (h *harness) cmdHeartbeat(d *datadriven.TestData) string {
	_, out := h.propose(&Heartbeat{NodeID: pos(d), Draining: arg(d, "draining", "") != "", AtMs: ms(d, "at"),
		Generations: gens(d)})
	return h.okOr(out, "heartbeat %s", pos(d))
}

// path splits "t/ns/name".
func path(d *datadriven.TestData) (string, string, string) {
	p := strings.SplitN(pos(d), "/", 3)
	for len(p) < 3 {
		p = append(p, "")
	}
	return p[0], p[1], p[2]
}

func (h *harness) catalogCommand(d *datadriven.TestData) Command {
	t, ns, name := path(d)
	switch d.Cmd {
	case "create-tenant":
		return &CreateTenant{TenantID: t}
	case "create-namespace":
		return &CreateNamespace{TenantID: t, Namespace: ns}
	case "delete-tenant":
		return &DeleteTenant{TenantID: t}
	case "delete-namespace":
		return &DeleteNamespace{TenantID: t, Namespace: ns}
	case "create-stream":
		return streamCommand(d)
	case "delete-stream":
		return &DeleteStream{TenantID: t, Namespace: ns, Stream: name}
	case "create-cache":
		return &CreateCache{TenantID: t, Namespace: ns, Cache: name, Shards: uint32(num(d, "shards", 1)),
			ReplicationFactor: num(d, "rf", 1), AtMs: ms(d, "at")}
	}
	return &DeleteCache{TenantID: t, Namespace: ns, Cache: name}
}

// streamCommand gives create-stream's (and propose-stream's) command.
func streamCommand(d *datadriven.TestData) *CreateStream {
	t, ns, name := path(d)
	return &CreateStream{TenantID: t, Namespace: ns, Stream: name, Shards: uint32(num(d, "shards", 1)),
		ReplicationFactor: num(d, "rf", 1), Routing: arg(d, "routing", ""), Durable: true, AtMs: ms(d, "at")}
}

func (h *harness) cmdCatalog(d *datadriven.TestData) string {
	res, out := h.propose(h.catalogCommand(d))
	if out != "" {
		return out
	}
	switch v := res.Value.(type) {
	case Stream:
		return h.okOr("", "stream %s/%s/%s incarnation=%d routing=%s rf=%d\n%s", v.TenantID, v.Namespace, v.Stream,
			v.Incarnation, v.Routing, v.ReplicationFactor, h.placementOf("stream/"+pos(d)+"/"))
	case Cache:
		return h.okOr("", "cache %s/%s/%s incarnation=%d rf=%d\n%s", v.TenantID, v.Namespace, v.Cache,
			v.Incarnation, v.ReplicationFactor, h.placementOf("cache/"+pos(d)+"/"))
	}
	return h.okOr("", "%s %s", d.Cmd, pos(d))
}

func (h *harness) placementOf(prefix string) string {
	var b strings.Builder
	for _, a := range h.fsm.state.Assignments() {
		if strings.HasPrefix(a.Key(), prefix) {
			fmt.Fprintf(&b, "%s inc=%d leader=%s followers=%v gen=%d\n", a.Key(), a.Incarnation, a.Leader, a.Followers, a.Generation)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (h *harness) cmdPlacement(d *datadriven.TestData) string {
	out := h.placementOf(arg(d, "prefix", ""))
	load := h.fsm.state.placementLoad()
	var b strings.Builder
	for _, br := range h.fsm.state.Brokers() {
		fmt.Fprintf(&b, "\n%s leads %d, in %d sets", br.NodeID, load[br.NodeID].Leaders, load[br.NodeID].Replicas)
	}
	return strings.TrimPrefix(out+b.String(), "\n")
}

func (h *harness) cmdFinalize(d *datadriven.TestData) string {
	_, out := h.propose(&FinalizeFeature{Feature: pos(d), AtMs: ms(d, "at"), Auto: arg(d, "auto", "") != ""})
	return h.okOr(out, "enabled %v floor %d", featureNames(h.fsm.state), h.fsm.state.Floor())
}

func (h *harness) cmdDryRun(d *datadriven.TestData) string {
	e := CheckFinalize(h.fsm.state, pos(d), ms(d, "at"), h.fsm.cfg.LivenessTimeout)
	if e == nil {
		return "dry run: " + pos(d) + " can be finalized"
	}
	return fmt.Sprintf("dry run %d: %v\nlacking: %v", e.HTTPStatus(), e, e.Lacking)
}

func (h *harness) cmdAuto(d *datadriven.TestData) string {
	step := AutoFinalizePlan(h.fsm.state, h.voters, ms(d, "at"), h.fsm.cfg.LivenessTimeout)
	var b strings.Builder
	fmt.Fprintf(&b, "%s", step.Action)
	if len(step.Starting) > 0 {
		fmt.Fprintf(&b, " starting=%v", step.Starting)
	}
	if step.RetryAtMs != 0 {
		fmt.Fprintf(&b, " retry-at=%dms", step.RetryAtMs)
	}
	for _, c := range step.Commands {
		fmt.Fprintf(&b, "\nfinalize %s", c.Feature)
		if arg(d, "apply", "") != "" {
			_, out := h.propose(&c)
			b.WriteString(": " + h.okOr(out, "enabled"))
		}
	}
	return b.String()
}
