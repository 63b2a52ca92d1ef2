package ring

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SQE user_data tags. A caller's op travels under the index of its in-flight
// slot (below tagInternal), and its Completion gets the caller's UserData
// back from the slot, so every UserData value is free for callers. The ring's
// own requests carry these reserved tags and their completions are consumed
// inside Wait/Close, never surfaced:
//   - tagWake: the IORING_OP_READ kept armed on the wake eventfd;
//   - tagCancel: IORING_OP_ASYNC_CANCEL requests issued by Close.
const (
	tagInternal = 1 << 63
	tagWake     = tagInternal | 1
	tagCancel   = tagInternal | 2
)

// closeDrainTimeout bounds how long Close waits for cancelled ops.
const closeDrainTimeout = 5 * time.Second

// slot is the ring's record of one in-flight op: the caller's UserData, the
// buffers kept reachable and pinned until the completion is reaped, the
// iovec array and timespec the kernel reads.
type slot struct {
	userData uint64
	busy     bool
	pinned   bool // pinner holds pins: Unpin on release
	pinner   runtime.Pinner
	iov      []unix.Iovec // reused; grows to the largest Iov seen
	ts       kernelTimespec
	buf      []byte
	bufs     [][]byte
}

// internalMem is the ring's own kernel-visible memory, placed in an
// anonymous mmap page (outside the Go heap: no pinning needed).
type internalMem struct {
	wakeBuf uint64
	_       uint64
	arg     geteventsArg
	ts      kernelTimespec
}

// uringRing is the io_uring backend.
type uringRing struct {
	fd           int
	features     uint32
	setupFlags   uint32
	maps         ringMaps
	entries      int // caller SQ limit; the kernel SQ holds 2*entries
	userPrepared int // caller ops prepared since the last submission

	sqHead, sqTail, sqFlags *uint32
	sqMask                  uint32
	sqSize                  uint32
	sqes                    []sqe
	localTail               uint32 // next SQE to fill; published by storing sqTail

	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           []cqe

	slots     []slot
	free      []uint32 // stack of free slot indexes
	slotsPin  runtime.Pinner
	internal  []byte
	mem       *internalMem
	eventFD   int
	wakeMu    sync.RWMutex // guards closed and eventFD against Close for Wake
	closed    bool
	woke      bool
	wakeArmed bool
	reg       registry // registered files and buffers
}

// newUring sets up an io_uring ring whose callers may prepare entries ops
// per submission and keep 2*entries in flight. See Options.ThreadLocked for
// the setup flags. Errors wrap ErrUnsupported when the kernel refuses.
func newUring(entries uint32, threadLocked bool) (*uringRing, error) {
	fd, p, err := setupRing(2*entries, threadLocked)
	if err != nil {
		return nil, err
	}
	r := &uringRing{fd: fd, features: p.features, setupFlags: p.flags, entries: int(entries), eventFD: -1}
	if err := r.init(&p); err != nil {
		r.release()
		return nil, err
	}
	return r, nil
}

// init checks features, maps the rings, builds slots and arms the wake read.
func (r *uringRing) init(p *uringParams) error {
	if err := checkFeatures(r.fd, p); err != nil {
		return err
	}
	maps, err := mapRing(r.fd, p)
	if err != nil {
		return err
	}
	r.maps = maps
	sq, cq := maps.sqRing, maps.cqRing
	r.sqHead, r.sqTail, r.sqFlags = word(sq, p.sqOff.head), word(sq, p.sqOff.tail), word(sq, p.sqOff.flags)
	r.sqMask, r.sqSize = *word(sq, p.sqOff.ringMask), p.sqEntries
	array := unsafe.Slice(word(sq, p.sqOff.array), p.sqEntries)
	for i := range array {
		array[i] = uint32(i) // identity: SQE i sits in array slot i for good
	}
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&maps.sqeMem[0])), p.sqEntries)
	r.localTail = atomic.LoadUint32(r.sqTail)
	r.cqHead, r.cqTail = word(cq, p.cqOff.head), word(cq, p.cqOff.tail)
	r.cqMask = *word(cq, p.cqOff.ringMask)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&cq[p.cqOff.cqes])), p.cqEntries)

	r.slots = make([]slot, 2*r.entries)
	r.slotsPin.Pin(&r.slots[0])
	r.free = make([]uint32, len(r.slots))
	for i := range r.free {
		r.free[i] = uint32(len(r.free) - 1 - i)
	}
	if r.internal, err = unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
		return fmt.Errorf("ring: mmap internal page: %w", err)
	}
	r.mem = (*internalMem)(unsafe.Pointer(&r.internal[0]))
	// Blocking on purpose: io_uring answers -EAGAIN at once for reads of an
	// O_NONBLOCK file instead of waiting for data.
	if r.eventFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC); err != nil {
		return fmt.Errorf("ring: eventfd: %w", err)
	}
	r.armWake()
	return r.submitAll()
}

// Backend returns BackendUring.
func (r *uringRing) Backend() string { return BackendUring }

// nextSQE claims the next SQE, zeroed, at the local tail. The caller has
// checked that the SQ has room.
func (r *uringRing) nextSQE() *sqe {
	e := &r.sqes[r.localTail&r.sqMask]
	*e = sqe{}
	r.localTail++
	return e
}

// sqRoom reports how many SQEs can still be filled before the SQ is full.
func (r *uringRing) sqRoom() uint32 {
	return r.sqSize - (r.localTail - atomic.LoadUint32(r.sqHead))
}

// armWake queues the read on the wake eventfd (tagWake).
func (r *uringRing) armWake() {
	e := r.nextSQE()
	e.opcode = opRead
	e.fd = int32(r.eventFD)
	e.addr = uint64(uintptr(unsafe.Pointer(&r.mem.wakeBuf)))
	e.len = 8
	e.userData = tagWake
	r.wakeArmed = true
}

// Prepare queues op; see Ring.Prepare. Go-heap buffers are pinned here.
func (r *uringRing) Prepare(op *Op) error {
	if r.closed {
		return ErrClosed
	}
	if err := validate(op); err != nil {
		return err
	}
	// One SQE stays free for re-arming the wake read.
	if r.userPrepared >= r.entries || r.sqRoom() < 2 {
		return ErrQueueFull
	}
	if len(r.free) == 0 {
		return ErrTooManyInFlight
	}
	idx := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	s := &r.slots[idx]
	s.userData, s.busy = op.UserData, true
	e := r.nextSQE()
	e.fd = op.FD
	e.userData = uint64(idx)
	fillSQE(e, s, op)
	if op.Link {
		e.flags |= sqeIOLink
	}
	if op.DSync {
		e.opFlags = rwfDSync
	}
	if op.Fixed {
		e.flags |= sqeFixedFile
	}
	r.userPrepared++
	return nil
}

// rwOpcodes maps the plain read/write op codes to io_uring opcodes.
var rwOpcodes = [opCodeCount]uint8{OpWrite: opWrite, OpRead: opRead, OpWriteFixed: opWriteFixed, OpReadFixed: opReadFixed}

// fillSQE writes op into e, recording and pinning its memory in s.
func fillSQE(e *sqe, s *slot, op *Op) {
	e.off = uint64(op.Off)
	switch op.Code {
	case OpNop:
		e.opcode = opNop
	case OpWrite, OpRead, OpWriteFixed, OpReadFixed:
		e.opcode = rwOpcodes[op.Code]
		e.bufIndex = op.BufIndex
		s.buf = op.Buf
		if len(op.Buf) > 0 {
			s.pinner.Pin(&op.Buf[0])
			s.pinned = true
			e.addr = uint64(uintptr(unsafe.Pointer(&op.Buf[0])))
		}
		e.len = uint32(len(op.Buf))
	case OpWritev, OpReadv:
		e.opcode = opWritev
		if op.Code == OpReadv {
			e.opcode = opReadv
		}
		s.bufs = op.Iov
		s.iov = fillIovecs(s.iov[:0], op.Iov)
		for _, b := range op.Iov {
			if len(b) > 0 {
				s.pinner.Pin(&b[0])
			}
		}
		s.pinner.Pin(&s.iov[0])
		s.pinned = true
		e.addr = uint64(uintptr(unsafe.Pointer(&s.iov[0])))
		e.len = uint32(len(s.iov))
	case OpFsync, OpFdatasync:
		e.opcode = opFsync
		if op.Code == OpFdatasync {
			e.opFlags = fsyncDatasync
		}
		e.off = 0
	case OpFallocate:
		e.opcode = opFallocate
		e.addr = uint64(op.Len)
		e.len = op.Mode
	case OpTimeout:
		e.opcode = opTimeout
		s.ts = kernelTimespec{sec: int64(op.Timeout / time.Second), nsec: int64(op.Timeout % time.Second)}
		e.addr = uint64(uintptr(unsafe.Pointer(&s.ts))) // s lives in the pinned slots array
		e.len = 1
		e.off = 0 // pure timer: no completion count
	case OpPoll:
		e.opcode = opPollAdd
		e.opFlags = op.Mode
		e.off = 0
	}
}

// releaseSlot unpins and forgets the memory of slot idx and frees it.
func (r *uringRing) releaseSlot(idx uint32) {
	s := &r.slots[idx]
	if s.pinned {
		s.pinner.Unpin()
	}
	s.buf, s.bufs, s.busy, s.pinned = nil, nil, false, false
	r.free = append(r.free, idx)
}

// Submit publishes every prepared SQE and enters the kernel; see Ring.Submit.
func (r *uringRing) Submit() error {
	if r.closed {
		return ErrClosed
	}
	return r.submitAll()
}

// submitAll publishes the SQ tail and calls io_uring_enter until the kernel
// consumed every SQE.
func (r *uringRing) submitAll() error {
	for {
		pending := r.publish()
		if pending == 0 {
			return nil
		}
		_, errno := r.enter(pending, 0, 0, nil)
		if errno != 0 && errno != unix.EINTR {
			return fmt.Errorf("ring: io_uring_enter submit: %w", errno)
		}
	}
}

// enter calls io_uring_enter; arg, when set, selects IORING_ENTER_EXT_ARG.
// It is a blocking syscall: the Go scheduler hands the P to another thread.
func (r *uringRing) enter(toSubmit, minComplete, flags uint32, arg *geteventsArg) (uint32, unix.Errno) {
	var argp, size uintptr
	if arg != nil {
		flags |= enterExtArg
		argp, size = uintptr(unsafe.Pointer(arg)), unsafe.Sizeof(*arg)
	}
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(minComplete), uintptr(flags), argp, size)
	return uint32(n), errno
}

// Wake writes the eventfd whose armed read completes a blocked Wait.
func (r *uringRing) Wake() error {
	r.wakeMu.RLock()
	defer r.wakeMu.RUnlock()
	if r.closed {
		return ErrClosed
	}
	one := uint64(1)
	_, err := unix.Write(r.eventFD, (*[8]byte)(unsafe.Pointer(&one))[:])
	if err != nil {
		return fmt.Errorf("ring: wake eventfd: %w", err)
	}
	return nil
}
