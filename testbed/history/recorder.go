package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"
)

// ErrClosed is returned by Pending.Complete and Recorder.Record after Close.
var ErrClosed = errors.New("history recorder closed")

// ErrCompleted is returned by a second Complete of one Pending operation.
var ErrCompleted = errors.New("history operation already completed")

// RecorderOptions configures a Recorder.
type RecorderOptions struct {
	// Now reads the clock; nil means time.Now. Its results must carry a
	// monotonic reading (time.Now's do) for InvokeNS/CompleteNS to be
	// monotonic; tests pass a fake clock.
	Now func() time.Time
}

// Recorder writes a history as JSON lines, one Op per line, each line written
// with one Write call when its operation completes (so lines are in
// complete_ns order; Index follows invoke_ns order). All methods are safe for
// concurrent use. The first write error is sticky: later lines are dropped
// and Err, Complete and Close return it.
type Recorder struct {
	mu      sync.Mutex
	w       io.Writer
	closer  io.Closer
	now     func() time.Time
	start   time.Time
	next    int
	pending map[int]*Pending
	err     error
	closed  bool
}

// Pending is an invoked operation not yet completed. Complete it exactly once
// (Ok, Fail, Info or Complete); Close completes the rest as Info.
type Pending struct {
	r    *Recorder
	op   Op
	done bool // guarded by r.mu
}

// NewRecorder returns a Recorder writing to w; the run starts now (InvokeNS
// counts from this call). Close does not close w.
func NewRecorder(w io.Writer, opts RecorderOptions) *Recorder {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Recorder{w: w, now: now, start: now(), pending: map[int]*Pending{}}
}

// CreateRecorder creates (or truncates) the file at path and returns a
// Recorder writing to it; Close closes the file. Errors: those of os.Create.
func CreateRecorder(path string, opts RecorderOptions) (*Recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	r := NewRecorder(f, opts)
	r.closer = f
	return r, nil
}

// Start returns the wall-clock time of the run's start (InvokeNS == 0).
func (r *Recorder) Start() time.Time { return r.start.Round(0).UTC() }

// stamp returns the monotonic ns since start and the wall time of now().
func (r *Recorder) stamp() (int64, time.Time) {
	t := r.now()
	ns := t.Sub(r.start).Nanoseconds()
	if ns < 0 {
		ns = 0
	}
	return ns, t.Round(0).UTC()
}

// Invoke records the invocation of an operation by process (>= 0) through
// client, of kind with arguments in, and returns its Pending. in is copied by
// value: its slices must not change afterwards. After Close the Pending's
// Complete returns ErrClosed.
func (r *Recorder) Invoke(process int, client string, kind Kind, in Input) *Pending {
	r.mu.Lock()
	defer r.mu.Unlock()
	ns, wall := r.stamp() // under the lock: index order is invoke_ns order
	p := &Pending{r: r, op: Op{
		Index: r.next, Process: process, Client: client, Kind: kind,
		InvokeNS: ns, InvokeWall: wall, In: in,
	}}
	r.next++
	if r.closed {
		p.done = true
		return p
	}
	r.pending[p.op.Index] = p
	return p
}

// Index returns the operation's index in the history.
func (p *Pending) Index() int { return p.op.Index }

// Complete records the completion of the operation with outcome and answer
// out; a non-nil err is stored as the Error text. Errors: ErrCompleted on a
// second call, ErrClosed after Close, or the recorder's sticky write error.
func (p *Pending) Complete(outcome Outcome, out Output, err error) error {
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	ns, wall := r.stamp() // under the lock: line order is complete_ns order
	if p.done {
		if r.closed {
			return ErrClosed
		}
		return ErrCompleted
	}
	p.done = true
	delete(r.pending, p.op.Index)
	p.op.CompleteNS, p.op.CompleteWall = max(ns, p.op.InvokeNS), wall
	p.op.Outcome, p.op.Out = outcome, out
	if err != nil {
		p.op.Error = err.Error()
	}
	return r.writeLocked(&p.op)
}

// Ok completes the operation as a definite success with answer out.
func (p *Pending) Ok(out Output) error { return p.Complete(OK, out, nil) }

// Fail completes the operation as a definite failure: use it only when the
// operation certainly had no effect. err is the failure, stored as text.
func (p *Pending) Fail(err error) error { return p.Complete(Fail, Output{}, err) }

// Info completes the operation as indeterminate, with out holding whatever
// was observed (records an interrupted read did deliver) and err the cause.
func (p *Pending) Info(out Output, err error) error { return p.Complete(Info, out, err) }

// Record writes an operation that is invoked and completed at once (a
// replica-log dump, say). Errors: as Complete.
func (r *Recorder) Record(process int, client string, kind Kind, in Input, outcome Outcome, out Output) error {
	return r.Invoke(process, client, kind, in).Complete(outcome, out, nil)
}

// writeLocked marshals op and writes it as one line; r.mu is held.
func (r *Recorder) writeLocked(op *Op) error {
	if r.err != nil {
		return r.err
	}
	line, err := json.Marshal(op)
	if err != nil {
		r.err = fmt.Errorf("history: marshal operation %d: %w", op.Index, err)
		return r.err
	}
	if _, err := r.w.Write(append(line, '\n')); err != nil {
		r.err = fmt.Errorf("history: write operation %d: %w", op.Index, err)
	}
	return r.err
}

// Err returns the sticky write error, or nil.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close completes every pending operation as Info ("not completed when the
// recorder closed"), in index order, closes the file of CreateRecorder and
// returns the first error. Later calls return nil.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ns, wall := r.stamp()
	if r.closed {
		return nil
	}
	r.closed = true
	open := make([]*Pending, 0, len(r.pending))
	for _, p := range r.pending {
		open = append(open, p)
	}
	sort.Slice(open, func(i, j int) bool { return open[i].op.Index < open[j].op.Index })
	for _, p := range open {
		p.done = true
		p.op.CompleteNS, p.op.CompleteWall = max(ns, p.op.InvokeNS), wall
		p.op.Outcome, p.op.Error = Info, "not completed when the recorder closed"
		_ = r.writeLocked(&p.op)
	}
	r.pending = nil
	err := r.err
	if r.closer != nil {
		if cerr := r.closer.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}
	return err
}
