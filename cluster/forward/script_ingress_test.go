package forward

import (
	"fmt"

	"github.com/cockroachdb/datadriven"
)

var opWords = map[string]Operation{"publish": OpPublish, "cache": OpCache, "subscribe": OpSubscribe}

// cmdIngress: ingress op=publish|cache|subscribe self=a leader=NODE|none gen=N [unassigned]
func (h *harness) cmdIngress(d *datadriven.TestData) (string, error) {
	a := cmdArgs(d)
	gen, err := a.u64("gen", 0)
	if err != nil {
		return "", err
	}
	e := Entry{Assigned: true, Generation: gen}
	if l := a.str("leader", "b"); l != "none" {
		e.Leader = nodeOf(l)
	}
	if _, ok := a["unassigned"]; ok {
		e = Entry{}
	}
	dec := Ingress(opWords[a.str("op", "publish")], e, a.str("self", "a"))
	if dec.Verdict == ServeLocal || dec.Verdict == NoOwner {
		return dec.Verdict.String(), nil
	}
	return fmt.Sprintf("%v node=%s addr=%s gen=%d", dec.Verdict, dec.Node.ID, dec.Node.Addr, dec.Generation), nil
}
