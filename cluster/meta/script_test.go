package meta

// The datadriven scripts under testdata/ drive the state machine one command
// at a time, each named after the seed's paragraph it checks
// (../shared/seeds/upgrades-and-compatibility.txt). Regenerate expectations
// with
//
//	go test ./cluster/meta -run TestScripts -rewrite
//
// and review the diff like code.

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
		h := &harness{fsm: New(Config{}), snaps: map[string][]byte{}}
		datadriven.RunTest(t, path, h.run)
	})
}

// harness is one script's state machine, its voters, the next index and the
// saved snapshots.
type harness struct {
	fsm    *FSM
	voters []string
	index  uint64
	snaps  map[string][]byte
	holds  Holds
	kept   map[string][]byte // entries proposed and not applied yet, by name
}

type handler func(h *harness, d *datadriven.TestData) string

var commands map[string]handler

func init() {
	commands = map[string]handler{
		"new": (*harness).cmdNew, "voters": (*harness).cmdVoters, "member": (*harness).cmdMember,
		"register": (*harness).cmdRegister, "heartbeat": (*harness).cmdHeartbeat,
		"create-tenant": (*harness).cmdCatalog, "create-namespace": (*harness).cmdCatalog,
		"create-stream": (*harness).cmdCatalog, "create-cache": (*harness).cmdCatalog,
		"delete-tenant": (*harness).cmdCatalog, "delete-namespace": (*harness).cmdCatalog,
		"delete-stream": (*harness).cmdCatalog, "delete-cache": (*harness).cmdCatalog,
		"finalize": (*harness).cmdFinalize, "dry-run": (*harness).cmdDryRun,
		"auto": (*harness).cmdAuto, "report": (*harness).cmdReport, "assign": (*harness).cmdAssign,
		"placement": (*harness).cmdPlacement, "brokers": (*harness).cmdBrokers, "state": (*harness).cmdState,
		"snapshot": (*harness).cmdSnapshot, "restore": (*harness).cmdRestore, "corrupt": (*harness).cmdCorrupt,
		"feed": (*harness).cmdFeed, "raw": (*harness).cmdRaw, "add-member": (*harness).cmdAddMember,
		"hold": (*harness).cmdHold, "check-write": (*harness).cmdCheckWrite, "conflict": (*harness).cmdConflict,
		"propose-stream": (*harness).cmdProposeStream, "apply": (*harness).cmdApply,
	}
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	fn, ok := commands[d.Cmd]
	if !ok {
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	return fn(h, d)
}

// arg gives the value of key=value, or def.
func arg(d *datadriven.TestData, key, def string) string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			if len(a.Vals) == 0 {
				return "true"
			}
			return strings.Join(a.Vals, ",")
		}
	}
	return def
}

// list gives key=(a,b) as a slice (nil when absent or empty).
func list(d *datadriven.TestData, key string) []string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			var out []string
			for _, v := range a.Vals {
				if v != "" {
					out = append(out, v)
				}
			}
			return out
		}
	}
	return nil
}

// pos gives the first positional argument.
func pos(d *datadriven.TestData) string {
	if len(d.CmdArgs) == 0 {
		scriptFail(d, "%s: needs an argument", d.Cmd)
	}
	return d.CmdArgs[0].Key
}

// ms gives at=DURATION (since the Unix epoch, in the scripts' fake time) in
// milliseconds; at=0 by default.
func ms(d *datadriven.TestData, key string) int64 {
	v, err := time.ParseDuration(arg(d, key, "0s"))
	if err != nil {
		scriptFail(d, "%s: %v", key, err)
	}
	return v.Milliseconds()
}

func num(d *datadriven.TestData, key string, def int) int {
	n, err := strconv.Atoi(arg(d, key, strconv.Itoa(def)))
	if err != nil {
		scriptFail(d, "%s: %v", key, err)
	}
	return n
}

// propose encodes cmd for the voters and applies it at the next index.
func (h *harness) propose(cmd Command) (Result, string) {
	entry, err := h.fsm.Propose(cmd, h.voters)
	if err != nil {
		return Result{}, fmt.Sprintf("propose refused %d: %v", StatusOf(err), err)
	}
	return h.apply(entry)
}

func (h *harness) apply(entry []byte) (Result, string) {
	h.index++
	res, err := h.fsm.Apply(h.index, entry)
	if err != nil {
		return res, fmt.Sprintf("fatal: %v", err)
	}
	if res.Err != nil {
		return res, fmt.Sprintf("refused %d: %v", StatusOf(res.Err), res.Err)
	}
	return res, ""
}

func (h *harness) cmdNew(d *datadriven.TestData) string {
	cfg := Config{ChangeRetention: num(d, "retention", 0)}
	h.fsm, h.index, h.voters, h.snaps, h.holds = New(cfg), 0, nil, map[string][]byte{}, Holds{}
	return fmt.Sprintf("liveness=%s retention=%d", h.fsm.cfg.LivenessTimeout, h.fsm.cfg.ChangeRetention)
}

func (h *harness) cmdVoters(d *datadriven.TestData) string {
	h.voters = nil
	for _, a := range d.CmdArgs {
		h.voters = append(h.voters, a.Key)
	}
	lvl, low, unrep := GroupLevel(h.fsm.state, h.voters)
	return fmt.Sprintf("voters %v: lowest level reported %d (%q), unreported %v", h.voters, lvl, low, unrep)
}

func (h *harness) cmdMember(d *datadriven.TestData) string {
	_, out := h.propose(&MemberLevelReport{MemberID: pos(d), Level: Level(num(d, "level", int(BuildMaxLevel)))})
	return h.okOr(out, "member %s at level %d; floor %d", pos(d), num(d, "level", int(BuildMaxLevel)), h.fsm.state.Floor())
}

func (h *harness) okOr(out, format string, args ...any) string {
	if out != "" {
		return out
	}
	return fmt.Sprintf("ok %d: ", h.index) + fmt.Sprintf(format, args...)
}

// scriptFail stops the script on a malformed command line.
func scriptFail(d *datadriven.TestData, format string, args ...any) {
	panic(fmt.Sprintf("%s: %s", d.Pos, fmt.Sprintf(format, args...)))
}
