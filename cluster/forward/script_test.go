package forward

// The datadriven scripts under testdata drive the three decisions: owner.txt (Decide with
// real tokens through AuthCheck, and relabelled frames through proto's decoder),
// retry.txt (the Machine, event by event, and whole conversations between a forwarder and
// an owner of either build), ingress.txt (Ingress). Every case's header names the seed
// section and row it checks. Regenerate the expected output with
// `go test ./cluster/forward -run TestScripts -rewrite` and review the diff.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"felix/proto"
)

func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{t: t}
		datadriven.RunTest(t, path, h.run)
	})
}

// harness is one script's state: the auth fixture (made at first use) and the machine
// being driven.
type harness struct {
	t   *testing.T
	fix *authFixture
	m   *Machine
}

var commands = map[string]func(h *harness, d *datadriven.TestData) (string, error){
	"decide":   (*harness).cmdDecide,
	"relabel":  (*harness).cmdRelabel,
	"start":    (*harness).cmdStart,
	"events":   (*harness).cmdEvents,
	"converse": (*harness).cmdConverse,
	"ingress":  (*harness).cmdIngress,
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	fn, ok := commands[d.Cmd]
	if !ok {
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	out, err := fn(h, d)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	return strings.TrimRight(out, "\n") + "\n"
}

// args is the key=value arguments of a command (or of one line of an events block).
type args map[string]string

func cmdArgs(d *datadriven.TestData) args {
	a := args{}
	for _, c := range d.CmdArgs {
		if len(c.Vals) > 0 {
			a[c.Key] = c.Vals[0]
		} else {
			a[c.Key] = ""
		}
	}
	return a
}

// lineArgs parses "word key=value ..." into the word and its arguments.
func lineArgs(line string) (string, args) {
	f := strings.Fields(line)
	a := args{}
	if len(f) == 0 {
		return "", a
	}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		a[k] = v
	}
	return f[0], a
}

func (a args) str(k, def string) string {
	if v, ok := a[k]; ok {
		return v
	}
	return def
}

func (a args) u64(k string, def uint64) (uint64, error) {
	v, ok := a[k]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", k, v, err)
	}
	return n, nil
}

// kindArg reads a kind given by number (22) or name (AuthorizedForwardPublish).
func (a args) kind(k string) (proto.Kind, error) {
	v := a[k]
	if n, err := strconv.ParseUint(v, 10, 16); err == nil {
		return proto.Kind(n), nil
	}
	for i := proto.Kind(0); i.Known(); i++ {
		if i.String() == v {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%s=%q: not a kind", k, v)
}

var opNames = map[string]proto.CacheOp{"put": proto.CacheOpPut, "get": proto.CacheOpGet,
	"delete": proto.CacheOpDelete, "counter-add": proto.CacheOpCounterAdd, "counter-get": proto.CacheOpCounterGet,
	"bad": 9}

var codeNames = map[string]proto.InternalCode{"StaleRoute": proto.InternalStaleRoute,
	"Unavailable": proto.InternalUnavailable, "Unauthorized": proto.InternalUnauthorized,
	"Overload": proto.InternalOverload, "ProtocolVersion": proto.InternalProtocolVersion,
	"Malformed": proto.InternalMalformed, "StorageFailed": proto.InternalStorageFailed,
	"LogGap": proto.InternalLogGap, "LogConflict": proto.InternalLogConflict,
	"FencedEpoch": proto.InternalFencedEpoch, "UnsupportedKind": proto.InternalUnsupportedKind}

func codeName(c proto.InternalCode) string {
	for n, v := range codeNames {
		if v == c {
			return n
		}
	}
	return fmt.Sprintf("code(%d)", c)
}

// describe prints an FLXI answer the way the scripts expect it.
func describe(m proto.InternalMessage) string {
	switch m := m.(type) {
	case nil:
		return "none"
	case *proto.InternalNotLeader:
		return fmt.Sprintf("NotLeader owner=%s addr=%s gen=%d", m.OwnerNodeID, m.OwnerAddress, m.Generation)
	case *proto.ForwardPublishError:
		return "ForwardPublishError " + codeName(m.Code)
	case *proto.ForwardCacheError:
		return "ForwardCacheError " + codeName(m.Code)
	case *proto.InternalError:
		return "Error " + codeName(m.Code)
	case *proto.ForwardPublishOk:
		return fmt.Sprintf("ForwardPublishOk first=%d last=%d", m.FirstOffset, m.LastOffset)
	case *proto.ForwardPublishDuplicate:
		return fmt.Sprintf("ForwardPublishDuplicate first=%d last=%d", m.FirstOffset, m.LastOffset)
	case *proto.ForwardCacheOk:
		return fmt.Sprintf("ForwardCacheOk present=%t value=%q", m.Present, m.Value)
	case *proto.UnsupportedKind:
		return fmt.Sprintf("UnsupportedKind refused=%v", m.RefusedKind)
	}
	return m.Kind().String()
}

// describeAction prints a Machine action.
func describeAction(a Action) string {
	switch a.Step {
	case Send:
		return fmt.Sprintf("send attempt=%d to=%s gen=%d kind=%v backoff=%v", a.Attempt, a.To, a.Generation,
			a.Kind, a.Backoff)
	case Ack:
		if a.Last == OutCacheOk {
			return fmt.Sprintf("ack present=%t value=%q", a.Present, a.Value)
		}
		return fmt.Sprintf("ack first=%d last=%d duplicate=%t", a.FirstOffset, a.LastOffset, a.Duplicate)
	}
	s := fmt.Sprintf("%v reason=%v last=%v", a.Step, a.Reason, a.Last)
	if a.Code != 0 {
		s += " code=" + codeName(a.Code)
	}
	return s + " client=" + a.ClientCode()
}
