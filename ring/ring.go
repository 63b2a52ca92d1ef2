// Package ring is Felix's asynchronous disk I/O layer: a thin io_uring binding
// written over golang.org/x/sys/unix and a plain-syscall fallback, both behind
// the Ring interface (docs/architecture.md, "ring"; issue 3, item 1).
//
// A Ring is owned by one goroutine: only the goroutine that created it calls
// Prepare, Submit, Wait and Close. Wake is the one goroutine-safe method.
//
// Life of an operation: the owner fills an Op and calls Prepare, which copies
// the Op into the ring (the Op struct itself may be reused at once) and pins
// every Go-heap buffer it names; Submit hands every prepared op to the kernel
// (the syscall backend runs them there and then); Wait reaps completions into
// a caller-owned []Completion. Buffers stay pinned and reachable until the
// completion of their op is reaped by Wait (or until Close has drained them):
// the caller must not reuse or modify them before that.
//
// Memory from unix.Mmap (for example AlignedBuffer) is outside the Go heap and
// never moves, so it needs no pinning; Prepare's pinning is a no-op for it.
//
// Backend selection (New): Options.Backend (the broker passes FELIX_IO_BACKEND
// there; ring reads no environment), else io_uring with a fallback to the syscall backend when the kernel refuses
// io_uring (ENOSYS, EPERM from a seccomp profile, EACCES or
// kernel.io_uring_disabled, missing features). The choice is logged once per
// process with log/slog and exported as the gauge felix_io_backend.
//
// The io_uring backend (uring*.go): io_uring_setup with a CQ of twice the
// SQ (IORING_SETUP_CQSIZE) and SINGLE_ISSUER|DEFER_TASKRUN for thread-locked
// owners, else COOP_TASKRUN|TASKRUN_FLAG, each retried without on EINVAL;
// requires IORING_FEAT_NODROP and EXT_ARG and probes every opcode it uses
// (IORING_REGISTER_PROBE). The SQ ring, CQ ring and SQE array are mmap'd (one
// ring mapping under IORING_FEAT_SINGLE_MMAP). Memory ordering: SQEs are
// written with plain stores, then the SQ tail is published with an atomic
// store (release), and the kernel's SQ head read with an atomic load; CQEs are
// read after an atomic load of the CQ tail (acquire) and released by an
// atomic store of the CQ head. Blocking waits use io_uring_enter(GETEVENTS)
// with IORING_ENTER_EXT_ARG for the timeout; Wake writes an eventfd on which
// an IORING_OP_READ is kept armed under a reserved user_data (see tagWake).
package ring

import (
	"errors"
	"fmt"
	"time"
)

// Ring is one queue of asynchronous file operations (docs/architecture.md, "ring").
//
// Only the creating goroutine calls Prepare, Submit, Wait and Close; Wake may be
// called from any goroutine. Implementations: the io_uring backend ("uring") and
// the syscall backend ("syscall").
type Ring interface {
	// Backend names the implementation: BackendUring or BackendSyscall.
	Backend() string
	// Prepare queues one op without submitting it. The Op is copied; its
	// buffers are pinned and owned by the ring until the op's completion is
	// reaped. Errors: ErrQueueFull when the submission queue is full (Submit,
	// then retry); ErrTooManyInFlight when every in-flight slot is taken
	// (reap completions with Wait, then retry); ErrInvalidOp (wrapped, with the
	// reason) for a malformed op; ErrClosed after Close. A failed Prepare
	// queues nothing. Pass a long-lived Op (a field, reused): a local Op
	// whose address goes through this interface escapes to the heap.
	Prepare(op *Op) error
	// Submit hands every prepared op to the kernel, in the order prepared.
	// The syscall backend runs file ops synchronously here and queues their
	// completions. Errors: ErrClosed, or the io_uring_enter errno wrapped.
	Submit() error
	// Wait first submits any op prepared since the last Submit, then copies
	// up to len(dst) completions into dst and returns how many. It blocks until at least min completions are copied, Wake is called,
	// or timeout passes (timeout 0 with min > 0 means no timeout; min 0 never
	// blocks). A timeout or a Wake is not an error: n may be below min.
	// Reaping a completion releases (unpins) its op's buffers.
	// Errors: ErrClosed, or a kernel errno wrapped.
	Wait(dst []Completion, min int, timeout time.Duration) (int, error)
	// Wake makes a blocked Wait return early, or the next Wait if none is
	// blocked. Goroutine-safe; never blocks. Errors: ErrClosed.
	Wake() error
	// Close cancels ops still in flight, waits (bounded) for the kernel to
	// finish with their buffers, unpins them and releases the ring. Their
	// completions are discarded. Calling Close twice returns ErrClosed.
	Close() error
}

// Backend names, as returned by Ring.Backend and accepted by
// Options.Backend and FELIX_IO_BACKEND.
const (
	BackendUring   = "uring"
	BackendSyscall = "syscall"
)

// EnvBackend names the environment variable that forces a backend:
// FELIX_IO_BACKEND=uring|syscall (empty or "auto" means try uring, fall back).
// ring does not read it: the broker's configuration and the tests' helpers do,
// and pass the value in Options.Backend.
const EnvBackend = "FELIX_IO_BACKEND"

// OpCode names the operation an Op performs.
type OpCode uint8

// Op codes. Field use per code is documented on Op.
const (
	OpNop        OpCode = iota // completes with Res 0
	OpWrite                    // pwrite(FD, Buf, Off)
	OpWritev                   // pwritev(FD, Iov, Off)
	OpRead                     // pread(FD, Buf, Off)
	OpReadv                    // preadv(FD, Iov, Off)
	OpFsync                    // fsync(FD)
	OpFdatasync                // fdatasync(FD)
	OpFallocate                // fallocate(FD, Mode, Off, Len)
	OpTimeout                  // completes with -ETIME after Timeout
	OpPoll                     // one-shot poll(FD, Mode as poll events); Res is revents
	OpWriteFixed               // pwrite(FD, Buf, Off); Buf lies inside registered buffer BufIndex
	OpReadFixed                // pread(FD, Buf, Off); Buf lies inside registered buffer BufIndex
	opCodeCount
)

var opCodeNames = [...]string{"nop", "write", "writev", "read", "readv", "fsync", "fdatasync", "fallocate", "timeout", "poll", "write_fixed", "read_fixed"}

// String returns the lower-case name of the op code ("write", "fdatasync", ...).
func (c OpCode) String() string {
	if int(c) < len(opCodeNames) {
		return opCodeNames[c]
	}
	return fmt.Sprintf("opcode(%d)", uint8(c))
}

// Op is one request. Prepare copies it, so the caller may reuse the struct;
// the buffers it names are owned by the ring until the completion is reaped.
//
// Fields per Code:
//   - OpWrite, OpRead: FD, Buf (len(Buf) bytes), Off (byte offset in the file).
//   - OpWritev, OpReadv: FD, Iov (at most MaxIov buffers), Off.
//   - OpFsync, OpFdatasync: FD.
//   - OpFallocate: FD, Mode (FALLOC_FL_* flags), Off and Len in bytes.
//   - OpTimeout: Timeout (> 0); completes with Res = -ETIME when it expires.
//   - OpPoll: FD, Mode = poll events (unix.POLLIN, ...); Res = returned events.
//   - OpWriteFixed, OpReadFixed: FD, Buf, Off, BufIndex: Buf must lie inside
//     the buffer registered at BufIndex (Registrar.RegisterBuffers); the kernel
//     skips pinning its pages per op. Res -EFAULT when Buf lies outside it.
//   - OpNop: nothing.
//
// Fixed makes FD an index into the files registered with
// Registrar.RegisterFiles instead of a descriptor (io_uring's
// IOSQE_FIXED_FILE); an unregistered index completes with -EBADF.
//
// Link chains this op to the next one prepared: the next op starts only after
// this one succeeds; if this one fails (Res < 0, or a short read or write)
// every later op of the chain completes with -ECANCELED (io_uring's
// IOSQE_IO_LINK). The chain ends at the first op without Link. Link is not
// allowed on OpTimeout and OpPoll (ErrInvalidOp).
//
// DSync makes one write (OpWrite, OpWritev, OpWriteFixed) durable as if the
// file were opened O_DSYNC, for this call only (RWF_DSYNC: io_uring's rw_flags,
// pwritev2 on the syscall backend): the completion comes once the data and the
// metadata needed to read it back are on stable storage, as a write followed by
// an fdatasync of the file would give (issue 22: one I/O per durable commit).
// ErrInvalidOp on any other op code.
//
// UserData is returned unchanged in the op's Completion; every value is
// available to callers (the ring's internal completions use their own tags).
type Op struct {
	Code     OpCode
	FD       int32
	Buf      []byte
	Iov      [][]byte
	Off      int64
	Len      int64
	Mode     uint32
	Timeout  time.Duration
	Link     bool
	DSync    bool // RWF_DSYNC write (see above)
	UserData uint64
	Fixed    bool   // FD is a registered-file index
	BufIndex uint16 // registered buffer of OpWriteFixed/OpReadFixed
}

// Completion reports the end of one op. Res is the syscall result: bytes
// transferred for reads and writes, 0 for fsync/fdatasync/fallocate/nop,
// revents for OpPoll, and -errno on failure (-ETIME for an expired OpTimeout,
// -ECANCELED for an op cancelled by its chain or by Close).
type Completion struct {
	UserData uint64
	Res      int32
}

// Err returns nil when Res >= 0, else the errno (a unix.Errno, errors.Is-able
// against unix.EIO, unix.ECANCELED, ...).
func (c Completion) Err() error {
	if c.Res >= 0 {
		return nil
	}
	return errnoOf(-c.Res)
}

// MaxIov is the most buffers one OpWritev/OpReadv may carry (Linux IOV_MAX).
const MaxIov = 1024

// DefaultEntries is the submission queue size used when Options.Entries is 0.
const DefaultEntries = 256

// Options configure New. The zero value is valid.
type Options struct {
	// Backend forces a backend: BackendUring or BackendSyscall. Empty or
	// "auto" means uring with fallback. Forcing uring makes New fail instead
	// of falling back.
	Backend string
	// Entries is the submission queue size (power of two, 1..32768; 0 means
	// DefaultEntries). At most 2*Entries ops may be in flight.
	Entries uint32
	// ThreadLocked tells the uring backend that the calling goroutine has
	// called runtime.LockOSThread and that it alone will use the ring; it
	// then asks for IORING_SETUP_SINGLE_ISSUER|DEFER_TASKRUN (retried without
	// them on EINVAL). Without it the ring uses COOP_TASKRUN only. The core
	// goroutines set it; tests that do not lock their thread must not.
	ThreadLocked bool
}

// Errors returned by rings. Compare with errors.Is.
var (
	// ErrQueueFull: the submission queue is full; Submit, then retry Prepare.
	ErrQueueFull = errors.New("ring: submission queue full")
	// ErrTooManyInFlight: 2*Entries ops are in flight; reap with Wait first.
	ErrTooManyInFlight = errors.New("ring: too many ops in flight")
	// ErrInvalidOp: the op is malformed; the wrapping error says why.
	ErrInvalidOp = errors.New("ring: invalid op")
	// ErrClosed: the ring was closed.
	ErrClosed = errors.New("ring: closed")
	// ErrUnsupported: the io_uring backend cannot run here; the wrapping
	// error gives the reason (errno, sysctl, missing feature or opcode).
	ErrUnsupported = errors.New("ring: io_uring unavailable")
	// ErrBadBackend: Options.Backend names no backend.
	ErrBadBackend = errors.New("ring: unknown backend")
)

// validate checks the fields an op's code needs, shared by both backends.
func validate(op *Op) error {
	switch op.Code {
	case OpNop, OpFsync, OpFdatasync:
	case OpWrite, OpRead, OpWriteFixed, OpReadFixed:
		if len(op.Buf) > 1<<31-1 {
			return fmt.Errorf("%w: %s buffer of %d bytes exceeds 2 GiB", ErrInvalidOp, op.Code, len(op.Buf))
		}
	case OpWritev, OpReadv:
		if len(op.Iov) == 0 || len(op.Iov) > MaxIov {
			return fmt.Errorf("%w: %s with %d buffers (want 1..%d)", ErrInvalidOp, op.Code, len(op.Iov), MaxIov)
		}
	case OpFallocate:
		if op.Off < 0 || op.Len <= 0 {
			return fmt.Errorf("%w: fallocate off=%d len=%d", ErrInvalidOp, op.Off, op.Len)
		}
	case OpTimeout:
		if op.Timeout <= 0 {
			return fmt.Errorf("%w: timeout %v must be positive", ErrInvalidOp, op.Timeout)
		}
	case OpPoll:
	default:
		return fmt.Errorf("%w: unknown op code %d", ErrInvalidOp, uint8(op.Code))
	}
	if op.Fixed && (op.Code == OpNop || op.Code == OpTimeout) {
		return fmt.Errorf("%w: Fixed on %s, which takes no file", ErrInvalidOp, op.Code)
	}
	if op.DSync && op.Code != OpWrite && op.Code != OpWritev && op.Code != OpWriteFixed {
		return fmt.Errorf("%w: DSync on %s, which is not a write", ErrInvalidOp, op.Code)
	}
	if op.Link && (op.Code == OpTimeout || op.Code == OpPoll) {
		return fmt.Errorf("%w: Link on %s is not supported", ErrInvalidOp, op.Code)
	}
	if op.Off < 0 && op.Code != OpNop && op.Code != OpTimeout && op.Code != OpPoll {
		return fmt.Errorf("%w: negative offset %d", ErrInvalidOp, op.Off)
	}
	return nil
}
