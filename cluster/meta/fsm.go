package meta

import (
	"errors"
	"time"

	memdb "github.com/hashicorp/go-memdb"
)

// Config is the state machine's configuration; every member must use the
// same values. Zero fields take the defaults.
type Config struct {
	// LivenessTimeout: a broker is down once this long has passed since its
	// last registration or heartbeat (DefaultLivenessTimeout).
	LivenessTimeout time.Duration
	// ChangeRetention: change-feed rows kept
	// (FELIX_CONTROLPLANE_CHANGE_RETENTION_MAX_ROWS; DefaultChangeRetention).
	ChangeRetention int
}

// DefaultChangeRetention is spec/config.md §5's
// FELIX_CONTROLPLANE_CHANGE_RETENTION_MAX_ROWS default.
const DefaultChangeRetention = 10000

// Result is one applied entry's outcome: its index and kind, the value the
// command produced (a Stream, Broker, Assignment, FeatureState…), or Err, a
// typed refusal with an HTTP status (StatusOf) that left the state unchanged.
type Result struct {
	Index uint64
	Kind  Kind
	Value any
	Err   error
}

// FSM is the control plane's state machine. It is not goroutine-safe: the
// Raft wrapper calls Apply, Snapshot and Restore from one goroutine (as
// hashicorp/raft does) and hands States (immutable) to readers. Its tables
// are a go-memdb database, db, that only Apply writes (one write txn per
// entry); each applied entry leaves a new State over a frozen snapshot of
// it.
type FSM struct {
	cfg   Config
	db    *memdb.MemDB
	state *State
	feed  feed
}

// New gives an empty state machine.
func New(cfg Config) *FSM {
	if cfg.LivenessTimeout <= 0 {
		cfg.LivenessTimeout = DefaultLivenessTimeout
	}
	if cfg.ChangeRetention <= 0 {
		cfg.ChangeRetention = DefaultChangeRetention
	}
	db := freshDB()
	return &FSM{cfg: cfg, db: db, state: committed(db, 0, Meta{}), feed: feed{retention: cfg.ChangeRetention, epoch: 1}}
}

// Config gives the configuration with defaults filled.
func (f *FSM) Config() Config { return f.cfg }

// State gives the current point-in-time state (O(1); later Applies do not
// change it).
func (f *FSM) State() *State { return f.state }

// txn is one Apply's working copy of the state.
type txn struct {
	s       State
	cfg     Config
	index   uint64
	level   Level
	changes []Change
}

func (tx *txn) record(entity, op, key string, value any) {
	tx.changes = append(tx.changes, Change{Seq: tx.index, Entity: entity, Op: op, Key: key, Value: value})
}

// ErrIndexOrder is the *FatalError cause when Apply is given an index not
// above the last one applied.
var ErrIndexOrder = errors.New("index not above the last applied")

// Apply applies the committed entry at index (issue 17 item 2). The error is
// a *FatalError (errors.Is ErrUnreadableEntry): an unknown kind or level, a
// malformed body, an index out of order; the member must log it and exit.
// A refused command is Result.Err, with the state unchanged but for its
// index. A successful one raises the floor to the entry's level and appends
// its changes to the feed, each with Seq = index.
func (f *FSM) Apply(index uint64, entry []byte) (Result, error) {
	if index <= f.state.index {
		return Result{}, &FatalError{Index: index, Reason: "index out of order", Err: ErrIndexOrder}
	}
	cmd, level, err := DecodeEntry(index, entry)
	if err != nil {
		return Result{}, err
	}
	w := f.db.Txn(true)
	tx := &txn{s: bind(&store{w: w}, f.state.index, f.state.meta), cfg: f.cfg, index: index, level: level}
	val, err := cmd.apply(tx)
	if serr := tx.s.st.err; serr != nil {
		w.Abort()
		return Result{}, &FatalError{Index: index, Kind: cmd.Kind(), Level: level, Reason: "state store: " + serr.Error(), Err: ErrStore}
	}
	res := Result{Index: index, Kind: cmd.Kind(), Value: val, Err: err}
	if err != nil {
		w.Abort()
		next := *f.state
		next.index = index
		f.state = &next
		return res, nil
	}
	w.Commit()
	m := tx.s.meta
	m.Floor = max(m.Floor, level)
	f.feed.append(tx.changes)
	f.state = committed(f.db, index, m)
	return res, nil
}

// Propose encodes cmd as an entry for the current state and the voters
// (issue 17 item 6). The command's required level must be reported by every
// voter (CheckWriteLevel); the entry's level is then raised towards the
// highest level the command gains from (a storage identity at 12, report
// stamps at 13, deletes taking shard state at 10) as far as the lowest level
// a voter reported: a voter that has not reported yet is taken to be on the
// same build as the others (it was checked when it was added). A command
// whose body depends on that level (a create_stream naming no routing, below
// level 3) is written as it applies at it (levelWriter). Errors:
// *LevelError (409).
func (f *FSM) Propose(cmd Command, voters []string) ([]byte, error) {
	req, full := cmd.levels(f.state)
	if err := CheckWriteLevel(f.state, voters, cmd.Kind().String(), req); err != nil {
		return nil, err
	}
	group, _, _ := GroupLevel(f.state, voters)
	level := max(req, min(full, group))
	if w, ok := cmd.(levelWriter); ok {
		cmd = w.atLevel(level)
	}
	return EncodeEntry(cmd, level)
}

// levelWriter is a command whose entry body depends on the level it is
// written at: atLevel gives the command to encode (never the caller's,
// changed).
type levelWriter interface {
	atLevel(level Level) Command
}
