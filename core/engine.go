// Package core is Felix's thread-per-core engine (docs/architecture.md,
// "core"): N cores, each one goroutine locked to its OS thread, owning one
// ring, one seglog disk and every shard hashed to it. Streams (durable on
// seglog, or in-memory replay rings), fanout of shared event frames to
// bounded subscriber queues, subscriptions that join history to live
// delivery, and the idempotent-producer window live here.
//
// # How to add a shard type or an operation
//
// Everything a core owns is reached from *core (core.go): c.shards (stream
// shards), c.timers (deadline-ordered timers run on the core), c.disk (the
// core's seglog disk: OpenLog, Flush, Poll), c.clock. A new shard type (a
// cache shard, a group table) is a struct whose fields only its core touches;
// give it a typed field on core (as c.cacheShards and c.groupShards, created
// lazily on the core; no `any` slots, no type assertions) and register a
// close hook with c.onStop so it closes its logs when the core stops.
//
// An operation is a type implementing operation (inbox.go):
//
//	type cachePutOp struct { key CacheKey; value []byte; done func(error) }
//	func (o *cachePutOp) apply(c *core)    { /* runs on the core; must not block */ }
//	func (o *cachePutOp) fail(err error)   { o.done(err) } // engine closed / inbox refused later
//
// The public Engine method picks the core (e.coreFor(name, shard)), then
// e.post(core, message{kind: msgOp, op: op}) and returns ErrOverloaded when
// the inbox is full; the answer goes back through the op's callback, which
// runs on the core and must not block (hand the result to a channel of
// capacity 1 or to a bounded queue). For a call that must wait, use
// e.runOn(core, func(c *core) error {...}). Periodic work: allocate a
// coreTimer once and c.timers.schedule(t, deadline) from the core.
package core

import (
	"context"
	"errors"
	felixclock "felix/clock"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"felix/seglog"
)

// FsyncMode is the durability of durable stream logs (spec/config.md §2,
// FELIX_DURABLE_FSYNC_MODE; spec/storage-format.md §5).
type FsyncMode uint8

const (
	// FsyncPeriodic: appends commit once written; an fdatasync runs every
	// Config.FsyncInterval. The config default.
	FsyncPeriodic FsyncMode = iota
	// FsyncOnCommit: an append commits after the fdatasync covering it.
	FsyncOnCommit
	// FsyncNone: appends commit once written; the kernel writes back.
	FsyncNone
)

// Config configures an Engine. Zero values take the defaults named per field.
type Config struct {
	// Cores is the number of cores. 0 = the number of CPUs the process may
	// run on. The engine reads no environment: felix-broker passes
	// FELIX_CORE_SHARDS here (broker.Config.EngineCores).
	Cores int
	// IOBackend is ring.Options.Backend of every core's ring: "" or "auto"
	// (io_uring, else the syscall backend), ring.BackendUring or
	// ring.BackendSyscall. felix-broker passes FELIX_IO_BACKEND here.
	IOBackend string
	// NoPinning skips sched_setaffinity (cores are still locked to threads).
	NoPinning bool
	// DataDir is FELIX_DURABLE_STORAGE_DIR; empty = in-memory streams only.
	DataDir string
	// Fsync and FsyncInterval (default 250 ms) apply to every durable log,
	// except the record and producer-key logs of a StreamSpec.SyncOnCommit
	// stream, which fsync on_commit.
	Fsync         FsyncMode
	FsyncInterval time.Duration
	// SegmentBytes is the segment rollover size (FELIX_DURABLE_SEGMENT_BYTES;
	// 0 = seglog's default, 256 MiB).
	SegmentBytes int64
	// RetentionBytes and RetentionAge bound each durable shard's record log
	// (FELIX_DURABLE_RETENTION_BYTES / _SECONDS; 0 = off): every
	// RetentionInterval (default 60 s) each core drops whole sealed segments
	// from the head of its shards' logs (spec/storage-format.md §5).
	// Subscribers below the new head get too_old. A stream's own
	// StreamSpec.RetentionBytes / RetentionAge win over these, bound by bound.
	RetentionBytes    int64
	RetentionAge      time.Duration
	RetentionInterval time.Duration
	// InboxCapacity bounds each core's inbox in messages (default 4096).
	InboxCapacity int
	// DrainBatch is the most messages a core takes per loop turn (default 256).
	DrainBatch int
	// IdleTurns is how many empty loop turns (each yields with
	// runtime.Gosched and polls the ring without blocking) a core makes
	// after its last work before it sleeps in its ring (default 0: sleep at
	// once; negative = 0). The core goroutine is locked to its thread, so
	// every yield hands the P to another thread and back (two futex
	// wake-ups): measured through the network, 64 turns cost more CPU than
	// the sleep/wake-up pair they skip (docs/bench/perf.md).
	IdleTurns int
	// SubscriberQueueCapacity is the default per-subscription queue, in
	// frames (spec/config.md FELIX_SUBSCRIBER_QUEUE_CAPACITY, default 512).
	SubscriberQueueCapacity int
	// BlockTimeout is the default bound of a Block subscription's wait
	// (default 2 s): past it the subscription ends with ErrSlowSubscriber.
	BlockTimeout time.Duration
	// HeldPublishes bounds, per shard, the publishes held while a Block
	// subscriber is full (default 1024); beyond it publishes get ErrOverloaded.
	HeldPublishes int
	// MemoryReplayRecords is an in-memory shard's replay ring in records
	// (default 65536).
	MemoryReplayRecords int
	// ProducerWindow is the number of idempotent keys kept per shard
	// (default 4096).
	ProducerWindow int
	// HistoryFrameBytes bounds the payload bytes of one history frame
	// (default 65536, spec/config.md FELIX_EVENT_BATCH_MAX_BYTES).
	HistoryFrameBytes int
	// Metrics receives the engine's metrics; nil = a new set (Engine.Metrics).
	Metrics *metrics.Set
	// Logger receives the engine's storage log lines (torn tails truncated,
	// damaged shards, storage failures); nil = slog.Default().
	Logger *slog.Logger
	// Clock is the engine's time: record timestamps, TTLs, leases, timers
	// (felix/clock; nil = clock.Real()). felix-broker passes the test clock
	// hook's clock here (clock.FromEnv).
	Clock felixclock.Clock
	// PreviousRunClean is the storage root's run-state verdict at start
	// (seglog.ReadRunState CleanStop, spec/storage-format.md §7): the previous
	// run stopped cleanly. Each durable log's first open in this engine passes
	// it to seglog.Options.PreviousRunClean, so a damaged or gapped tail
	// refuses the open (seglog.CorruptDataAfterEnd...) instead of being
	// truncated (docs/storage-format.md "Recovery"); reopens within the run
	// keep the torn-tail repair. felix-broker sets it from its run-state.
	PreviousRunClean bool
	// RepairDamagedTail is the seed's torn-tail rule for a damaged tail
	// (seeds/upgrades-and-compatibility.txt "Clean stops and crashes"; issue
	// 23 item 2): set when the start took a new storage id (seglog.BeginRun
	// renewed it: an unclean stop under fsync periodic or none), a log's first
	// open in this run cuts a damaged tail of its newest segment that is not a
	// provable torn write (seglog.Options.RepairChecksumTail), logged and
	// counted as a torn tail, instead of opening the shard unservable. Never
	// for a log whose own mode is on_commit (a StreamSpec.SyncOnCommit stream:
	// it acknowledged only fsynced records). felix-broker sets it.
	RepairDamagedTail bool
	opened            *openedLogs // log directories opened in this run (seglogdisk.go)

	// Seams for tests: disk factory (called on the core goroutine) and
	// manual mode (no core goroutines: the caller steps cores). The clock
	// seam is Clock (clock/clocktest.Fake in tests).
	newDisk func(core int) (coreDisk, error)
	manual  bool
	fs      seglog.FS // file seam of the production disk; nil = seglog.OSFS
}

func (c *Config) normalize() error {
	if c.Cores == 0 {
		c.Cores = max(1, len(allowedCPUs()))
	}
	if c.IOBackend == "" {
		c.IOBackend = testIOBackend
	}
	if c.Cores < 1 || c.Cores > 1024 {
		return fmt.Errorf("%w: Cores %d", ErrInvalid, c.Cores)
	}
	setDefault(&c.InboxCapacity, 4096)
	setDefault(&c.DrainBatch, 256)
	c.IdleTurns = max(c.IdleTurns, 0)
	setDefault(&c.SubscriberQueueCapacity, 512)
	setDefault(&c.HeldPublishes, 1024)
	setDefault(&c.MemoryReplayRecords, 65536)
	setDefault(&c.ProducerWindow, 4096)
	setDefault(&c.HistoryFrameBytes, 65536)
	if c.FsyncInterval == 0 {
		c.FsyncInterval = 250 * time.Millisecond
	}
	if c.BlockTimeout == 0 {
		c.BlockTimeout = 2 * time.Second
	}
	if c.RetentionInterval == 0 {
		c.RetentionInterval = time.Minute
	}
	if c.SegmentBytes < 0 || c.RetentionBytes < 0 || c.RetentionAge < 0 || c.RetentionInterval < 0 {
		return fmt.Errorf("%w: segment bytes %d, retention %d bytes / %v every %v", ErrInvalid,
			c.SegmentBytes, c.RetentionBytes, c.RetentionAge, c.RetentionInterval)
	}
	if c.Fsync > FsyncNone || c.FsyncInterval < 0 || c.BlockTimeout < 0 {
		return fmt.Errorf("%w: fsync mode %d, interval %v, block timeout %v", ErrInvalid, c.Fsync, c.FsyncInterval, c.BlockTimeout)
	}
	if c.Clock == nil {
		c.Clock = felixclock.Real()
	}
	if c.Metrics == nil {
		c.Metrics = metrics.NewSet()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.newDisk == nil {
		c.newDisk = c.defaultDisk
	}
	if c.opened == nil {
		c.opened = &openedLogs{dirs: map[string]bool{}}
	}
	return nil
}

func setDefault(v *int, d int) {
	if *v <= 0 {
		*v = d
	}
}

// Engine is the set of cores plus the catalog of streams. Its methods are
// goroutine-safe.
type Engine struct {
	cfg   Config
	cores []*core

	catalogMu sync.Mutex                                 // serializes catalog writes
	catalog   atomic.Pointer[map[StreamName]*streamMeta] // copy-on-write; lock-free reads

	caches cacheCatalog // the engine's caches (cache_catalog.go)

	nextSubscription atomic.Uint64
	closed           atomic.Bool
	exited           sync.WaitGroup

	// The startup checks of sealed segments (damage.go): cancelled and
	// waited for by Close; verifyTurn lets one run at a time.
	verifyCtx    context.Context
	verifyCancel context.CancelFunc
	verifiers    sync.WaitGroup
	verifyTurn   chan struct{}
}

// streamMeta is a stream's catalog entry. Immutable once published, except
// the round-robin counter (shared by every version of the entry): opening,
// closing or moving a shard publishes a new entry (withShard). shards[i] is
// state owned by its core, nil when shard i is not open on this engine;
// places[i] is the engine's snapshot of its role and generation there (the
// core's placement is authoritative: shardapi_state.go).
type streamMeta struct {
	spec   StreamSpec
	shards []*streamShard
	places []shardPlace
	rr     *atomic.Uint64
}

// newStreamMeta is a catalog entry for spec with no shard open.
func newStreamMeta(spec StreamSpec) *streamMeta {
	return &streamMeta{spec: spec, shards: make([]*streamShard, spec.Shards),
		places: make([]shardPlace, spec.Shards), rr: new(atomic.Uint64)}
}

// withShard returns a copy of m with shard i set to s at place p (s nil:
// not open here).
func (m *streamMeta) withShard(i int, s *streamShard, p shardPlace) *streamMeta {
	next := &streamMeta{spec: m.spec, shards: append([]*streamShard(nil), m.shards...),
		places: append([]shardPlace(nil), m.places...), rr: m.rr}
	next.shards[i], next.places[i] = s, p
	return next
}

// NewEngine starts cfg.Cores cores. Errors: ErrInvalid for a bad config, or
// the failure of a core's ring/disk setup.
func NewEngine(cfg Config) (*Engine, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, verifyTurn: make(chan struct{}, 1)}
	e.verifyCtx, e.verifyCancel = context.WithCancel(context.Background())
	empty := map[StreamName]*streamMeta{}
	e.catalog.Store(&empty)
	cpus := allowedCPUs()
	started := make(chan error, cfg.Cores)
	for i := 0; i < cfg.Cores; i++ {
		c := newCore(e, i)
		e.cores = append(e.cores, c)
		if cfg.manual {
			started <- c.init()
			continue
		}
		cpu := -1
		if !cfg.NoPinning && len(cpus) > 0 {
			cpu = cpus[i%len(cpus)]
		}
		e.exited.Add(1)
		go c.run(cpu, started)
	}
	var firstErr error
	for range cfg.Cores {
		if err := <-started; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		_ = e.Close(context.Background())
		return nil, firstErr
	}
	return e, nil
}

// Cores returns the number of cores.
func (e *Engine) Cores() int { return len(e.cores) }

// Metrics returns the set holding the engine's metrics (Config.Metrics).
func (e *Engine) Metrics() *metrics.Set { return e.cfg.Metrics }

// Close stops every core: each finishes the appends in flight (their done
// callbacks run), closes its logs and ends every subscription with
// ErrClosed. Publishes still queued get ErrClosed. It returns when every
// core has stopped, or ctx's error when ctx ends first (cores keep stopping).
func (e *Engine) Close(ctx context.Context) error {
	if !e.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	e.verifyCancel()
	for _, c := range e.cores {
		c.requestStop()
	}
	if e.cfg.manual {
		for _, c := range e.cores {
			for !c.stopped {
				c.step(false)
			}
		}
		e.verifiers.Wait()
		return nil
	}
	done := make(chan struct{})
	go func() { e.exited.Wait(); e.verifiers.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// post enqueues m on c and wakes c when it said it would sleep.
// Errors: ErrOverloaded (inbox full), ErrClosed.
func (e *Engine) post(c *core, m message) error {
	if m.kind == msgPublish {
		m.enqueuedNanos = e.cfg.Clock.MonoNanos()
	}
	wake, err := c.inbox.push(m)
	if wake {
		_ = c.disk.Wake() // push already cleared the sleeping flag
	}
	return err
}

// runOn runs fn on core c and returns its error: for control calls
// (catalog, subscribe) that must wait. A full inbox is retried for up to
// about a second before ErrOverloaded.
func (e *Engine) runOn(c *core, fn func(c *core) error) error {
	if e.closed.Load() {
		return ErrClosed
	}
	result := make(chan error, 1)
	op := &funcOp{fn: fn, result: result}
	for attempt := 0; ; attempt++ {
		err := e.post(c, message{kind: msgOp, op: op})
		if err == nil {
			break
		}
		if !errors.Is(err, ErrOverloaded) || attempt >= 1000 {
			return err
		}
		if e.cfg.manual {
			c.step(false)
		} else {
			time.Sleep(time.Millisecond)
		}
	}
	return e.await(c, result)
}

// await waits for result; a manual engine steps c meanwhile. A stopping
// engine answers ErrClosed when the core stops first.
func (e *Engine) await(c *core, result chan error) error {
	if e.cfg.manual {
		for {
			select {
			case err := <-result:
				return err
			default:
				c.step(false)
			}
		}
	}
	return <-result
}

// funcOp runs a function on a core and reports its error.
type funcOp struct {
	fn     func(c *core) error
	result chan error
}

func (o *funcOp) apply(c *core)  { o.result <- o.fn(c) }
func (o *funcOp) fail(err error) { o.result <- err }

// lookup returns the stream's catalog entry or nil.
func (e *Engine) lookup(name StreamName) *streamMeta {
	return (*e.catalog.Load())[name]
}

// coreFor returns the core owning shard of the stream named name.
func (e *Engine) coreFor(name StreamName, shard int) *core {
	return e.cores[coreOf(name, shard, len(e.cores))]
}

// defaultDisk is the production disk of core id: the memory disk when no
// DataDir is set, else the seglog disk on the core's ring.
func (c *Config) defaultDisk(id int) (coreDisk, error) {
	if c.DataDir == "" {
		return newMemoryDisk(c.IOBackend)
	}
	return newSeglogDisk(c, id)
}
