package sim

// The datadriven scripts under testdata/scripts drive the toy machine one
// command at a time and compare the trace with the expected output, in the
// style of etcd raft's interaction tests. Regenerate expectations with
//
//	go test ./cluster/sim -run TestScripts -rewrite
//
// and review the diff like code. A script pins its own seed (`new seed=N`):
// FELIX_TEST_SEED would change every trace, so it does not apply here.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/scripts", func(t *testing.T, path string) {
		h := &harness{t: t}
		datadriven.RunTest(t, path, h.run)
	})
}

// harness is one script's state: the run and the trace lines since the
// last command.
type harness struct {
	t     *testing.T
	sim   *Sim[[]byte]
	world *toyWorld
	lines []string
}

func (h *harness) trace(line string) { h.lines = append(h.lines, line) }

// commands maps each script command to its handler; a handler returns the
// text to append after the trace, or an error to print as "error: …".
var commands = map[string]func(h *harness, args []string, d *datadriven.TestData) (string, error){
	"new":          (*harness).cmdNew,
	"add-nodes":    (*harness).cmdAddNodes,
	"send":         (*harness).cmdSend,
	"deliver":      (*harness).cmdDeliver,
	"tick":         (*harness).cmdTick,
	"drop":         (*harness).cmdLinkFault,
	"dup":          (*harness).cmdLinkFault,
	"reorder":      (*harness).cmdLinkFault,
	"delay":        (*harness).cmdLinkFault,
	"corrupt":      (*harness).cmdCorrupt,
	"corrupt-file": (*harness).cmdCorruptFile,
	"partition":    (*harness).cmdPartition,
	"heal":         (*harness).cmdHeal,
	"crash":        (*harness).cmdCrash,
	"restart":      (*harness).cmdRestart,
	"status":       (*harness).cmdStatus,
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	fn, ok := commands[d.Cmd]
	if !ok {
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	if h.sim == nil && d.Cmd != "new" {
		if _, err := h.cmdNew(nil, &datadriven.TestData{}); err != nil {
			t.Fatal(err)
		}
		h.lines = nil
	}
	args := make([]string, 0, len(d.CmdArgs))
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 && !strings.Contains(a.Key, "=") {
			args = append(args, a.Key)
		}
	}
	out, err := fn(h, args, d)
	lines := h.lines
	h.lines = nil
	if err != nil {
		lines = append(lines, "error: "+err.Error())
	} else if out != "" {
		lines = append(lines, strings.TrimRight(out, "\n"))
	}
	if e := h.sim.Err(); e != nil && d.Cmd != "new" {
		lines = append(lines, "run failed: "+e.Error())
	}
	if len(lines) == 0 {
		return "ok\n"
	}
	return strings.Join(lines, "\n") + "\n"
}

// keyArg returns the value of key=value among d's arguments, or "".
func keyArg(d *datadriven.TestData, key string) string {
	if a, ok := d.Arg(key); ok && len(a.Vals) > 0 {
		return a.Vals[0]
	}
	return ""
}

// cmdNew: new [seed=N] [tick=D] [delay=D] [jitter=D] [bug=ack-before-sync|skip-checksum]
func (h *harness) cmdNew(_ []string, d *datadriven.TestData) (string, error) {
	opts := Options{Seed: 1, Link: LinkFaults{Delay: time.Millisecond}}
	var err error
	if v := keyArg(d, "seed"); v != "" {
		if opts.Seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			return "", err
		}
	}
	for key, dst := range map[string]*time.Duration{"tick": &opts.TickInterval, "delay": &opts.Link.Delay, "jitter": &opts.Link.Jitter} {
		if v := keyArg(d, key); v != "" {
			if *dst, err = time.ParseDuration(v); err != nil {
				return "", err
			}
		}
	}
	var bugs toyBugs
	switch keyArg(d, "bug") {
	case "":
	case "ack-before-sync":
		bugs.ackBeforeSync = true
	case "skip-checksum":
		bugs.skipChecksum = true
	default:
		return "", fmt.Errorf("unknown bug %q", keyArg(d, "bug"))
	}
	h.sim, h.world = newToySim(opts, bugs, h.trace)
	h.t.Logf("%s", h.sim.Describe())
	return h.sim.Describe(), nil
}

func (h *harness) cmdAddNodes(args []string, _ *datadriven.TestData) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("usage: add-nodes N")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return "", err
	}
	h.sim.AddNodes(n)
	return "", nil
}

// cmdSend: send FROM TO put V | repl SEQ V | ack SEQ | ok SEQ
func (h *harness) cmdSend(args []string, _ *datadriven.TestData) (string, error) {
	if len(args) < 4 {
		return "", fmt.Errorf("usage: send FROM TO put V | repl SEQ V | ack SEQ | ok SEQ")
	}
	from, err1 := parseNode(args[0])
	to, err2 := parseNode(args[1])
	msg, err3 := parseToyMsg(args[2:])
	if err := firstErr(err1, err2, err3); err != nil {
		return "", err
	}
	return "", h.sim.Send(from, to, msg.encode())
}

func parseToyMsg(words []string) (toyMsg, error) {
	nums := make([]uint64, len(words)-1)
	for i, w := range words[1:] {
		n, err := strconv.ParseUint(w, 10, 64)
		if err != nil {
			return toyMsg{}, err
		}
		nums[i] = n
	}
	switch {
	case words[0] == "put" && len(nums) == 1:
		return toyMsg{kind: kindPut, val: nums[0]}, nil
	case words[0] == "repl" && len(nums) == 2:
		return toyMsg{kind: kindRepl, seq: uint32(nums[0]), val: nums[1]}, nil
	case words[0] == "ack" && len(nums) == 1:
		return toyMsg{kind: kindAck, seq: uint32(nums[0])}, nil
	case words[0] == "ok" && len(nums) == 1:
		return toyMsg{kind: kindOK, seq: uint32(nums[0])}, nil
	}
	return toyMsg{}, fmt.Errorf("bad message %q", strings.Join(words, " "))
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// cmdDeliver: deliver [n=N]
func (h *harness) cmdDeliver(_ []string, d *datadriven.TestData) (string, error) {
	n := 0
	if v := keyArg(d, "n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			return "", err
		}
	}
	h.sim.Deliver(n)
	return "", nil
}

// cmdTick: tick [N]
func (h *harness) cmdTick(args []string, _ *datadriven.TestData) (string, error) {
	n := 1
	if len(args) > 0 {
		var err error
		if n, err = strconv.Atoi(args[0]); err != nil {
			return "", err
		}
	}
	h.sim.RunTicks(n)
	return fmt.Sprintf("now %v", h.sim.Now()), nil
}
