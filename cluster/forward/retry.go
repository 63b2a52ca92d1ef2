package forward

import (
	"strings"
	"time"

	"felix/core/cache"
	"felix/proto"
)

// Attempt budget and backoff (docs/forwarding.md, "The attempt budget").
const (
	// DefaultAttempts is the budget when Options.Attempts is 0: sends per client request,
	// the first included. Six covers a stale route (NotLeader, then the owner), a legacy
	// fallback and a few Overload or StaleRoute retries while a shard is reassigned.
	DefaultAttempts = 6
	// MaxAttempts bounds Options.Attempts: a shard being reassigned converges or fails
	// explicitly instead of chasing NotLeader around the cluster.
	MaxAttempts = 16
	// DefaultBackoff is the first wait before a retry after a retryable refusal or a
	// nothing-sent transport outcome; each further one doubles it.
	DefaultBackoff = 20 * time.Millisecond
	// DefaultMaxBackoff caps the doubling.
	DefaultMaxBackoff = time.Second
)

// Options bound the retries of one forward. The zero value takes the defaults.
type Options struct {
	Attempts   int           // sends per request, the first included [DefaultAttempts]; ≤ MaxAttempts
	Backoff    time.Duration // first backoff [DefaultBackoff]
	MaxBackoff time.Duration // backoff ceiling [DefaultMaxBackoff]; raised to Backoff if below it
}

// Request is the forward a Machine drives: the kind of its first send and, for a cache
// kind, the op.
type Request struct {
	// Kind of the first send: 22 (publish), 28 (idempotent publish), 23 (cache op) — a
	// forwarder holding a credential always sends these — or the legacy 2 or 6, which is what
	// a build from before the authorized kinds sends.
	Kind proto.Kind
	Op   proto.CacheOp // cache kinds: 1..5
}

// Step is the kind of an Action.
type Step uint8

// Steps. Send is the only non-terminal one; a Machine gives exactly one terminal Action.
const (
	Send          Step = iota + 1 // send Kind to To at Generation, after waiting Backoff
	Ack                           // answer the client from the owner's answer
	Fail                          // fail the client: Reason, Code (nothing was applied)
	Indeterminate                 // report indeterminate: the outcome is unknown; never retried here
)

var stepNames = [...]string{"invalid", "send", "ack", "fail", "indeterminate"}

// String names the step ("send", "ack", "fail", "indeterminate").
func (s Step) String() string {
	if int(s) < len(stepNames) {
		return stepNames[s]
	}
	return "Step(?)"
}

// Reason says why a Machine failed or reported indeterminate.
type Reason uint8

// Reasons.
const (
	ReasonNone        Reason = iota // Send, Ack
	ReasonRefused                   // Fail: the owner refused, not retryable (Code: Unauthorized, Malformed, StorageFailed, ...)
	ReasonNotSent                   // Fail: the transport refused before sending (Event.Err), a retry would too
	ReasonLoop                      // Fail: NotLeader named a (broker, generation) already tried
	ReasonNoOwner                   // Fail: NotLeader named no owner
	ReasonBudget                    // Fail: the attempt budget ran out on retryable outcomes (Last, Code: the last one)
	ReasonUnsupported               // Fail: UnsupportedKind for a kind with no fallback left for that owner
	ReasonDropped                   // Indeterminate: the connection dropped with the request outstanding
	ReasonTimedOut                  // Indeterminate: the request timed out (or the caller's context ended)
	ReasonProtocol                  // Indeterminate: an answer not in the request's shape, or an unknown error
)

var reasonNames = [...]string{"none", "refused", "not-sent", "loop", "no-owner", "budget", "unsupported",
	"dropped", "timed-out", "protocol"}

// String names the reason ("refused", "loop", "budget", "dropped", ...).
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "Reason(?)"
}

// Action is what the forwarder does next.
type Action struct {
	Step Step
	// Send: the attempt (1-based), the broker, the generation the message must name, the
	// kind to encode it as (AsKind), and the wait before sending (0: at once).
	Attempt    int
	To         string
	Generation uint64
	Kind       proto.Kind
	Backoff    time.Duration
	// Ack: the owner's answer. A publish: FirstOffset, LastOffset, Duplicate (a 28 the
	// owner had stored already). A cache op: Present, Value.
	FirstOffset, LastOffset uint64
	Duplicate               bool
	Present                 bool
	Value                   []byte
	// Fail, Indeterminate: why; Last is the outcome that ended it and Code the owner's
	// code when Last was a refusal.
	Reason Reason
	Last   Outcome
	Code   proto.InternalCode
}

// target is one (broker, generation) pair sent to; the node id is lower-cased (node ids
// compare without case).
type target struct {
	node string
	gen  uint64
}

// owned is the kind an owner was downgraded to after it answered UnsupportedKind.
type owned struct {
	node string
	kind proto.Kind
}

// Machine is the forwarder's retry state machine for one client request (seed, "Retrying a
// forwarded publish", "Acknowledging a forwarded publish", "Forwarded cache operation";
// docs/forwarding.md has the table). Feed each attempt's outcome to Step; it answers the
// next Action. Not safe for concurrent use; pure (the caller waits the Backoff).
type Machine struct {
	req      Request
	opts     Options
	cur      target     // the current attempt's target
	curTo    string     // its node id as named (Send.To)
	curKind  proto.Kind // the kind it was sent as
	attempts int        // sends so far
	backoffs int        // retries that waited a backoff
	tried    []target   // every (broker, generation) sent to
	down     []owned    // owners downgraded by UnsupportedKind
	resent   bool       // a cache Get/Delete/CounterGet was re-sent after an unknown outcome
	unknown  Outcome    // that unknown outcome (OutDropped/OutTimedOut), 0 if none
	done     bool
	final    Action
}

// NewMachine starts the forward of req at the broker and generation the ingress resolved
// (IngressDecision.Node.ID, .Generation) and returns its first Action, a Send of req.Kind
// at once. Errors: ErrKind (req.Kind is no forward request kind, or a cache op outside
// 1..5), ErrOptions (Attempts < 0 or > MaxAttempts, a negative backoff).
func NewMachine(req Request, to string, generation uint64, opts Options) (*Machine, Action, error) {
	if _, ok := RequiredAction(req.Kind, req.Op); !ok {
		return nil, Action{}, ErrKind
	}
	if opts.Attempts < 0 || opts.Attempts > MaxAttempts || opts.Backoff < 0 || opts.MaxBackoff < 0 {
		return nil, Action{}, ErrOptions
	}
	if opts.Attempts == 0 {
		opts.Attempts = DefaultAttempts
	}
	if opts.Backoff == 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.MaxBackoff < opts.Backoff {
		opts.MaxBackoff = opts.Backoff
	}
	m := &Machine{req: req, opts: opts}
	return m, m.send(to, generation, 0), nil
}

// Attempts returns how many sends the machine has asked for so far (never above the
// budget).
func (m *Machine) Attempts() int { return m.attempts }

// Done reports whether the machine gave its terminal Action.
func (m *Machine) Done() bool { return m.done }

// Step takes the outcome of the attempt last sent and returns the next Action, by the
// seed's table:
//
//	shed, backoff, unreachable              retry the same target after a backoff
//	NotLeader                               retry at once against the owner it names, at its
//	                                        generation; a (broker, generation) already tried is
//	                                        refused as a loop (Fail ReasonLoop), a broker not yet
//	                                        tried is followed even at the same generation
//	StaleRoute, Unavailable, Overload       retry the same target after a backoff
//	Unauthorized, Malformed, StorageFailed  Fail ReasonRefused (any other code likewise)
//	dropped, timed out                      Indeterminate; a cache Get, Delete or CounterGet
//	                                        is re-sent once first (cache.SafeToResend)
//	UnsupportedKind for the kind sent       re-send at once to that owner as the fallback kind
//	                                        (28 → 22, 22 → 2, 23 → 6), once per kind and owner;
//	                                        later sends to that owner use it; none left: Fail
//	the owner's Ok / Duplicate / cache Ok   Ack (the only way to Ack)
//	an answer not in the request's shape    Indeterminate ReasonProtocol
//
// A retry beyond the budget is Fail ReasonBudget instead. Once an attempt's outcome was
// unknown, no later outcome can make it Fail (the first attempt may have been applied):
// what would fail is Indeterminate. After the terminal Action, Step returns it again with
// ErrFinished.
func (m *Machine) Step(ev Event) (Action, error) {
	if m.done {
		return m.final, ErrFinished
	}
	switch ev.Outcome {
	case OutPublishOk, OutDuplicate, OutCacheOk:
		return m.ack(ev), nil
	case OutNotLeader:
		return m.redirect(ev), nil
	case OutPublishError, OutCacheError:
		return m.refused(ev), nil
	case OutUnsupportedKind:
		return m.unsupported(ev), nil
	case OutShed, OutBackoff, OutUnreachable:
		return m.retry(ev.Outcome, 0), nil
	case OutNotSent:
		return m.end(Fail, ReasonNotSent, ev.Outcome, 0), nil
	case OutDropped, OutTimedOut:
		return m.lost(ev.Outcome), nil
	}
	return m.end(Indeterminate, ReasonProtocol, ev.Outcome, 0), nil
}

// publish reports whether the request is a publish (2, 22, 28) rather than a cache op.
func (m *Machine) publish() bool { return publishKind(m.req.Kind) }

func (m *Machine) ack(ev Event) Action {
	switch {
	case ev.Outcome == OutPublishOk && m.publish(),
		ev.Outcome == OutDuplicate && m.curKind == proto.KindIdempotentForwardPublish:
		a := m.end(Ack, ReasonNone, ev.Outcome, 0)
		a.FirstOffset, a.LastOffset, a.Duplicate = ev.FirstOffset, ev.LastOffset, ev.Outcome == OutDuplicate
		m.final = a
		return a
	case ev.Outcome == OutCacheOk && !m.publish():
		a := m.end(Ack, ReasonNone, ev.Outcome, 0)
		a.Present, a.Value = ev.Present, ev.Value
		m.final = a
		return a
	}
	return m.end(Indeterminate, ReasonProtocol, ev.Outcome, 0)
}

func (m *Machine) redirect(ev Event) Action {
	if ev.Owner == "" {
		return m.end(Fail, ReasonNoOwner, ev.Outcome, 0)
	}
	to := target{node: strings.ToLower(ev.Owner), gen: ev.Generation}
	for _, t := range m.tried {
		if t == to {
			return m.end(Fail, ReasonLoop, ev.Outcome, 0)
		}
	}
	if m.attempts >= m.opts.Attempts {
		return m.end(Fail, ReasonBudget, ev.Outcome, 0)
	}
	return m.send(ev.Owner, ev.Generation, 0)
}

func (m *Machine) refused(ev Event) Action {
	if (ev.Outcome == OutPublishError) != m.publish() {
		return m.end(Indeterminate, ReasonProtocol, ev.Outcome, ev.Code)
	}
	if ev.Code.Retryable() {
		return m.retry(ev.Outcome, ev.Code)
	}
	return m.end(Fail, ReasonRefused, ev.Outcome, ev.Code)
}

func (m *Machine) unsupported(ev Event) Action {
	if ev.RefusedKind != m.curKind {
		return m.end(Indeterminate, ReasonProtocol, ev.Outcome, 0)
	}
	next, ok := fallback(m.curKind)
	if !ok {
		return m.end(Fail, ReasonUnsupported, ev.Outcome, 0)
	}
	if m.attempts >= m.opts.Attempts {
		return m.end(Fail, ReasonBudget, ev.Outcome, 0)
	}
	m.down = append(m.down, owned{node: m.cur.node, kind: next})
	return m.send(m.curTo, m.cur.gen, 0)
}

// fallback is the kind a forwarder re-sends as after UnsupportedKind (seed, "Authorization
// across a forward"; docs/internal-protocol.md §2): 28 → 22 (the dedupe key is lost), 22 →
// 2, 23 → 6. The legacy kinds have none.
func fallback(k proto.Kind) (proto.Kind, bool) {
	switch k {
	case proto.KindIdempotentForwardPublish:
		return proto.KindAuthorizedForwardPublish, true
	case proto.KindAuthorizedForwardPublish:
		return proto.KindForwardPublish, true
	case proto.KindAuthorizedForwardCacheOp:
		return proto.KindForwardCacheOp, true
	}
	return 0, false
}

// retry re-sends to the current target after the next backoff, within the budget.
func (m *Machine) retry(last Outcome, code proto.InternalCode) Action {
	if m.attempts >= m.opts.Attempts {
		return m.end(Fail, ReasonBudget, last, code)
	}
	d := m.opts.Backoff
	for i := 0; i < m.backoffs && d < m.opts.MaxBackoff; i++ {
		d *= 2
	}
	m.backoffs++
	return m.send(m.curTo, m.cur.gen, min(d, m.opts.MaxBackoff))
}

// lost handles a dropped connection or a timeout: a publish, a Put and a CounterAdd end
// Indeterminate; a cache op safe to re-send is sent once more to the same target at once.
func (m *Machine) lost(last Outcome) Action {
	reason := ReasonDropped
	if last == OutTimedOut {
		reason = ReasonTimedOut
	}
	if m.publish() || m.resent || !cache.SafeToResend(cache.OpKind(m.req.Op)) ||
		m.attempts >= m.opts.Attempts {
		return m.end(Indeterminate, reason, last, 0)
	}
	m.resent, m.unknown = true, last
	return m.send(m.curTo, m.cur.gen, 0)
}

// send records and returns the next Send to (node, gen) as the kind that owner reads.
func (m *Machine) send(node string, gen uint64, wait time.Duration) Action {
	t := target{node: strings.ToLower(node), gen: gen}
	kind := m.req.Kind
	for _, d := range m.down {
		if d.node == t.node {
			kind = d.kind
		}
	}
	m.cur, m.curTo, m.curKind = t, node, kind
	m.attempts++
	seen := false
	for _, x := range m.tried {
		seen = seen || x == t
	}
	if !seen {
		m.tried = append(m.tried, t)
	}
	return Action{Step: Send, Attempt: m.attempts, To: node, Generation: gen, Kind: kind, Backoff: wait}
}

// end records the terminal Action. A Fail after an attempt whose outcome was unknown is
// Indeterminate: that attempt may have been applied.
func (m *Machine) end(step Step, reason Reason, last Outcome, code proto.InternalCode) Action {
	if step == Fail && m.unknown != 0 {
		step, reason = Indeterminate, ReasonDropped
		if m.unknown == OutTimedOut {
			reason = ReasonTimedOut
		}
	}
	m.done = true
	m.final = Action{Step: step, Reason: reason, Last: last, Code: code}
	return m.final
}

// ClientCode is the client-visible error code of a terminal Action (client-protocol §8.7):
// "" for Ack; "indeterminate"; for Fail, "unauthorized", "malformed" or "storage_failed"
// from the owner's code, "overloaded" when the budget ran out on Overload or a shed
// request, else "shard_unavailable".
func (a Action) ClientCode() string {
	switch a.Step {
	case Ack, Send:
		return ""
	case Indeterminate:
		return "indeterminate"
	}
	switch {
	case a.Code == proto.InternalUnauthorized:
		return "unauthorized"
	case a.Code == proto.InternalMalformed || a.Code == proto.InternalProtocolVersion:
		return "malformed"
	case a.Code == proto.InternalStorageFailed:
		return "storage_failed"
	case a.Code == proto.InternalOverload || (a.Reason == ReasonBudget && a.Last == OutShed):
		return "overloaded"
	}
	return "shard_unavailable"
}
