package sim

// The fault commands of the scripts (see script_test.go).

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/datadriven"
)

func parseNode(s string) (NodeID, error) {
	if s == "*" {
		return Any, nil
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("node %q: %v", s, err)
	}
	return NodeID(n), nil
}

// parseLink parses "1->2", "*->2", "1->*" or "*" (every link).
func parseLink(s string) (Link, error) {
	if s == "*" {
		return Link{Any, Any}, nil
	}
	from, to, ok := strings.Cut(s, "->")
	if !ok {
		return Link{}, fmt.Errorf("link %q: want FROM->TO", s)
	}
	a, err1 := parseNode(from)
	b, err2 := parseNode(to)
	return Link{a, b}, firstErr(err1, err2)
}

func parsePercent(s string) (float64, error) {
	p, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil {
		return 0, fmt.Errorf("percent %q: %v", s, err)
	}
	return p, nil
}

// cmdLinkFault: drop LINK P% | dup LINK P% | reorder LINK P% [max=D] |
// delay LINK D [jitter=D]. It edits the setting in force on LINK.
func (h *harness) cmdLinkFault(args []string, d *datadriven.TestData) (string, error) {
	if len(args) != 2 {
		return "", fmt.Errorf("usage: %s LINK VALUE", d.Cmd)
	}
	l, err := parseLink(args[0])
	if err != nil {
		return "", err
	}
	f := h.sim.Faults()
	lf := f.Link(l.From, l.To)
	if err := editLinkFaults(&lf, d.Cmd, args[1], d); err != nil {
		return "", err
	}
	if err := f.SetLink(l.From, l.To, lf); err != nil {
		return "", err
	}
	return fmt.Sprintf("%v %v", l, lf), nil
}

func editLinkFaults(lf *LinkFaults, cmd, value string, d *datadriven.TestData) error {
	var err error
	switch cmd {
	case "drop":
		lf.DropPercent, err = parsePercent(value)
	case "dup":
		lf.DupPercent, err = parsePercent(value)
	case "reorder":
		lf.ReorderPercent, err = parsePercent(value)
		if v := keyArg(d, "max"); v != "" && err == nil {
			lf.ReorderDelay, err = time.ParseDuration(v)
		}
	case "delay":
		lf.Delay, err = time.ParseDuration(value)
		if v := keyArg(d, "jitter"); v != "" && err == nil {
			lf.Jitter, err = time.ParseDuration(v)
		}
	}
	return err
}

// cmdCorrupt: corrupt LINK next | corrupt LINK P%. "next" needs an exact
// link and damages the next message sent on it.
func (h *harness) cmdCorrupt(args []string, d *datadriven.TestData) (string, error) {
	if len(args) != 2 {
		return "", fmt.Errorf("usage: corrupt LINK next|P%%")
	}
	l, err := parseLink(args[0])
	if err != nil {
		return "", err
	}
	if args[1] != "next" {
		p, err := parsePercent(args[1])
		if err != nil {
			return "", err
		}
		lf := h.sim.Faults().Link(l.From, l.To)
		lf.CorruptPercent = p
		return fmt.Sprintf("%v %v", l, lf), h.sim.Faults().SetLink(l.From, l.To, lf)
	}
	if l.From == Any || l.To == Any {
		return "", fmt.Errorf("corrupt next needs an exact link")
	}
	h.sim.Faults().CorruptNext(l.From, l.To)
	return fmt.Sprintf("%v: the next message will be corrupted", l), nil
}

// cmdPartition: partition A B | C D (symmetric, any number of groups) or
// partition A B -> C D (one-way: A and B cannot reach C and D).
func (h *harness) cmdPartition(args []string, _ *datadriven.TestData) (string, error) {
	var groups [][]NodeID
	cur := []NodeID{}
	oneWay := false
	for _, a := range args {
		switch a {
		case "|", "->":
			oneWay = oneWay || a == "->"
			groups = append(groups, cur)
			cur = []NodeID{}
			continue
		}
		id, err := parseNode(a)
		if err != nil {
			return "", err
		}
		cur = append(cur, id)
	}
	groups = append(groups, cur)
	switch {
	case len(groups) < 2:
		return "", fmt.Errorf("usage: partition A.. | B.. [| C..] or partition A.. -> B..")
	case oneWay && len(groups) != 2:
		return "", fmt.Errorf("a one-way partition has two sides")
	case oneWay:
		h.sim.Faults().BlockOneWay(groups[0], groups[1])
	default:
		h.sim.Faults().Partition(groups...)
	}
	return "blocked " + linksString(h.sim.Faults().BlockedLinks()), nil
}

func linksString(ls []Link) string {
	if len(ls) == 0 {
		return "none"
	}
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.String()
	}
	return strings.Join(parts, " ")
}

// cmdHeal: heal (every link) or heal LINK.
func (h *harness) cmdHeal(args []string, _ *datadriven.TestData) (string, error) {
	if len(args) == 0 {
		h.sim.Faults().Heal()
	} else {
		l, err := parseLink(args[0])
		if err != nil {
			return "", err
		}
		h.sim.Faults().HealLink(l.From, l.To)
	}
	return "blocked " + linksString(h.sim.Faults().BlockedLinks()), nil
}

// cmdCrash: crash ID [cut=random|keep|lose]
func (h *harness) cmdCrash(args []string, d *datadriven.TestData) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("usage: crash ID [cut=random|keep|lose]")
	}
	id, err := parseNode(args[0])
	if err != nil {
		return "", err
	}
	mode := CutRandom
	if v := keyArg(d, "cut"); v != "" {
		if mode, err = ParseCutMode(v); err != nil {
			return "", err
		}
	}
	return "", h.sim.Crash(id, mode)
}

func (h *harness) cmdRestart(args []string, _ *datadriven.TestData) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("usage: restart ID")
	}
	id, err := parseNode(args[0])
	if err != nil {
		return "", err
	}
	return "", h.sim.Restart(id)
}

// cmdStatus prints every node, the network and the counters.
func (h *harness) cmdStatus(_ []string, _ *datadriven.TestData) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "now %v in-flight %d\n", h.sim.Now(), h.sim.InFlight())
	b.WriteString(h.sim.Status())
	links, def := h.sim.Faults().Settings()
	fmt.Fprintf(&b, "links: * %v", def)
	for _, l := range links {
		fmt.Fprintf(&b, "; %v %v", l, h.sim.Faults().Link(l.From, l.To))
	}
	fmt.Fprintf(&b, "\nblocked: %s\n", linksString(h.sim.Faults().BlockedLinks()))
	st := h.sim.Stats()
	fmt.Fprintf(&b, "stats: sent=%d delivered=%d dropped=%d dup=%d corrupt=%d ticks=%d crashes=%d restarts=%d",
		st.Sent, st.Delivered, st.Dropped, st.Duplicated, st.Corrupted, st.Ticks, st.Crashes, st.Restarts)
	return b.String(), nil
}

// cmdCorruptFile: corrupt-file ID FILE
func (h *harness) cmdCorruptFile(args []string, _ *datadriven.TestData) (string, error) {
	if len(args) != 2 {
		return "", fmt.Errorf("usage: corrupt-file ID FILE")
	}
	id, err := parseNode(args[0])
	if err != nil {
		return "", err
	}
	_, err = h.sim.CorruptFile(id, args[1])
	return "", err
}
