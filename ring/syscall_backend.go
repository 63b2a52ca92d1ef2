package ring

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// syscallRing is the fallback backend: plain pwrite/pwritev/pread/preadv/
// fsync/fdatasync/fallocate run synchronously in Submit, in prepared order,
// honouring Link. Their buffers are only touched during that call, so there is
// nothing to pin. Submit blocks for as long as each op takes: a read of an
// empty pipe or socket blocks it (poll first with OpPoll). OpTimeout runs on
// a runtime timer; OpPoll runs unix.Poll on a
// helper goroutine (one per pending poll) that also watches an eventfd which
// Close signals, so Close ends every helper. Completions go to a bounded
// queue that Wait drains.
type syscallRing struct {
	entries  int
	prepared []Op // len <= entries
	iov      []unix.Iovec
	one      [1][]byte // the single buffer of a DSync OpWrite, as an iovec list
	closed   atomic.Bool

	mu       sync.Mutex
	queue    []Completion // circular, capacity 2*entries
	qHead    int
	qLen     int
	inFlight int // prepared + running async + queued, <= 2*entries
	timers   map[*time.Timer]struct{}

	wakeCh  chan struct{} // Wake: capacity 1
	readyCh chan struct{} // async completion queued: capacity 1
	timer   *time.Timer   // Wait's timeout, reused
	closeFD int           // eventfd written by Close to end poll helpers
	helpers sync.WaitGroup
	reg     registry // registered files and buffers, resolved per op
}

// newSyscall builds the syscall backend with an SQ of entries ops.
func newSyscall(entries uint32) (*syscallRing, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("ring: eventfd: %w", err)
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &syscallRing{
		entries:  int(entries),
		prepared: make([]Op, 0, entries),
		queue:    make([]Completion, 2*entries),
		timers:   make(map[*time.Timer]struct{}),
		wakeCh:   make(chan struct{}, 1),
		readyCh:  make(chan struct{}, 1),
		timer:    t,
		closeFD:  efd,
	}, nil
}

// Backend returns BackendSyscall.
func (r *syscallRing) Backend() string { return BackendSyscall }

// Prepare queues a copy of op; see Ring.Prepare.
func (r *syscallRing) Prepare(op *Op) error {
	if r.closed.Load() {
		return ErrClosed
	}
	if err := validate(op); err != nil {
		return err
	}
	if len(r.prepared) == r.entries {
		return ErrQueueFull
	}
	r.mu.Lock()
	full := r.inFlight >= 2*r.entries
	if !full {
		r.inFlight++
	}
	r.mu.Unlock()
	if full {
		return ErrTooManyInFlight
	}
	r.prepared = append(r.prepared, *op)
	return nil
}

// Submit runs every prepared op in order; see Ring.Submit.
func (r *syscallRing) Submit() error {
	if r.closed.Load() {
		return ErrClosed
	}
	broken := false
	for i := range r.prepared {
		op := &r.prepared[i]
		switch {
		case broken:
			r.push(Completion{UserData: op.UserData, Res: -int32(unix.ECANCELED)})
		case op.Code == OpTimeout:
			r.startTimeout(op.UserData, op.Timeout)
		case op.Code == OpPoll:
			fd, res := r.reg.resolve(op)
			if res < 0 {
				r.push(Completion{UserData: op.UserData, Res: res})
				break
			}
			r.startPoll(op.UserData, int32(fd), op.Mode)
		default:
			res := r.execute(op)
			if op.Link && failed(op, res) {
				broken = true
			}
			r.push(Completion{UserData: op.UserData, Res: res})
		}
		if !op.Link {
			broken = false
		}
		*op = Op{} // drop buffer references
	}
	r.prepared = r.prepared[:0]
	return nil
}

// failed reports whether res breaks a link chain: an error, or a short
// read or write (io_uring's rule for IOSQE_IO_LINK).
func failed(op *Op, res int32) bool {
	if res < 0 {
		return true
	}
	switch op.Code {
	case OpWrite, OpRead, OpWriteFixed, OpReadFixed:
		return int(res) < len(op.Buf)
	case OpWritev, OpReadv:
		return int(res) < iovBytes(op.Iov)
	}
	return false
}

func iovBytes(iov [][]byte) int {
	n := 0
	for _, b := range iov {
		n += len(b)
	}
	return n
}

// execute runs one synchronous file op and returns its result or -errno.
func (r *syscallRing) execute(op *Op) int32 {
	fd, res := r.reg.resolve(op)
	if res < 0 {
		return res
	}
	for {
		n, err := r.execOnce(op, fd)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -int32(errnoValue(err))
		}
		return int32(n)
	}
}

func (r *syscallRing) execOnce(op *Op, fd int) (int, error) {
	if op.DSync {
		return r.writeDSync(op, fd)
	}
	switch op.Code {
	case OpWrite, OpWriteFixed:
		return unix.Pwrite(fd, op.Buf, op.Off)
	case OpRead, OpReadFixed:
		return unix.Pread(fd, op.Buf, op.Off)
	case OpWritev:
		return r.vectored(unix.SYS_PWRITEV, fd, op.Iov, op.Off)
	case OpReadv:
		return r.vectored(unix.SYS_PREADV, fd, op.Iov, op.Off)
	case OpFsync:
		return 0, unix.Fsync(fd)
	case OpFdatasync:
		return 0, unix.Fdatasync(fd)
	case OpFallocate:
		return 0, unix.Fallocate(fd, op.Mode, op.Off, op.Len)
	}
	return 0, nil // OpNop
}

// writeDSync runs a write op as pwritev2(RWF_DSYNC) (Op.DSync).
func (r *syscallRing) writeDSync(op *Op, fd int) (int, error) {
	bufs := op.Iov
	if op.Code != OpWritev {
		r.one[0] = op.Buf
		bufs = r.one[:]
		defer func() { r.one[0] = nil }()
	}
	r.iov = fillIovecs(r.iov[:0], bufs)
	var base unsafe.Pointer
	if len(r.iov) > 0 {
		base = unsafe.Pointer(&r.iov[0])
	}
	// pwritev2(fd, iov, iovcnt, pos_l, pos_h, flags): on 64-bit pos_h is unused.
	n, _, e := unix.Syscall6(unix.SYS_PWRITEV2, uintptr(fd), uintptr(base), uintptr(len(r.iov)), uintptr(op.Off), 0, rwfDSync)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// vectored runs preadv/pwritev with the ring's reusable iovec array (no
// per-op allocation, unlike unix.Pwritev).
func (r *syscallRing) vectored(trap uintptr, fd int, bufs [][]byte, off int64) (int, error) {
	r.iov = fillIovecs(r.iov[:0], bufs)
	var base unsafe.Pointer
	if len(r.iov) > 0 {
		base = unsafe.Pointer(&r.iov[0])
	}
	n, _, e := unix.Syscall6(trap, uintptr(fd), uintptr(base), uintptr(len(r.iov)), uintptr(off), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// fillIovecs appends one iovec per buffer of bufs to dst.
func fillIovecs(dst []unix.Iovec, bufs [][]byte) []unix.Iovec {
	for _, b := range bufs {
		var v unix.Iovec
		if len(b) > 0 {
			v.Base = &b[0]
			v.SetLen(len(b))
		}
		dst = append(dst, v)
	}
	return dst
}

func (r *syscallRing) startTimeout(userData uint64, d time.Duration) {
	var t *time.Timer
	r.mu.Lock()
	t = time.AfterFunc(d, func() {
		r.mu.Lock()
		delete(r.timers, t)
		r.mu.Unlock()
		r.push(Completion{UserData: userData, Res: -int32(unix.ETIME)})
		r.signalReady()
	})
	r.timers[t] = struct{}{}
	r.mu.Unlock()
}

// startPoll waits for events on fd on a helper goroutine; Close ends it by
// writing closeFD.
func (r *syscallRing) startPoll(userData uint64, fd int32, events uint32) {
	r.helpers.Add(1)
	go func() {
		defer r.helpers.Done()
		fds := []unix.PollFd{{Fd: fd, Events: int16(events)}, {Fd: int32(r.closeFD), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1)
			if err == unix.EINTR {
				continue
			}
			res := int32(fds[0].Revents)
			switch {
			case err != nil:
				res = -int32(errnoValue(err))
			case fds[1].Revents != 0:
				return // ring closed: completion discarded
			case fds[0].Revents&unix.POLLNVAL != 0:
				res = -int32(unix.EBADF) // as io_uring's POLL_ADD answers
			case fds[0].Revents == 0:
				continue
			}
			r.push(Completion{UserData: userData, Res: res})
			r.signalReady()
			return
		}
	}()
}

// push queues one completion; the in-flight bound guarantees room.
func (r *syscallRing) push(c Completion) {
	r.mu.Lock()
	if r.qLen < len(r.queue) {
		r.queue[(r.qHead+r.qLen)%len(r.queue)] = c
		r.qLen++
	}
	r.mu.Unlock()
}

// pop moves queued completions into dst and returns how many.
func (r *syscallRing) pop(dst []Completion) int {
	r.mu.Lock()
	n := 0
	for n < len(dst) && r.qLen > 0 {
		dst[n] = r.queue[r.qHead]
		r.qHead = (r.qHead + 1) % len(r.queue)
		r.qLen--
		n++
	}
	r.inFlight -= n
	r.mu.Unlock()
	return n
}

func (r *syscallRing) signalReady() {
	select {
	case r.readyCh <- struct{}{}:
	default:
	}
}

// Wait reaps completions; see Ring.Wait.
func (r *syscallRing) Wait(dst []Completion, min int, timeout time.Duration) (int, error) {
	if err := r.Submit(); err != nil {
		return 0, err
	}
	n := r.pop(dst)
	select {
	case <-r.wakeCh: // a Wake since the last Wait ends this one, as on uring
		return n + r.pop(dst[n:]), nil
	default:
	}
	if n >= min || n == len(dst) {
		return n, nil
	}
	var expired <-chan time.Time
	if timeout > 0 {
		r.timer.Reset(timeout)
		defer r.timer.Stop()
		expired = r.timer.C
	}
	for {
		select {
		case <-r.wakeCh:
			return n + r.pop(dst[n:]), nil
		case <-expired:
			return n + r.pop(dst[n:]), nil
		case <-r.readyCh:
			n += r.pop(dst[n:])
			if n >= min || n == len(dst) {
				return n, nil
			}
		}
	}
}

// Wake makes a blocked (or the next) Wait return; goroutine-safe.
func (r *syscallRing) Wake() error {
	if r.closed.Load() {
		return ErrClosed
	}
	select {
	case r.wakeCh <- struct{}{}:
	default:
	}
	return nil
}

// Close stops timers, ends poll helpers and discards pending completions.
func (r *syscallRing) Close() error {
	if r.closed.Swap(true) {
		return ErrClosed
	}
	r.mu.Lock()
	for t := range r.timers {
		t.Stop()
	}
	clear(r.timers)
	r.mu.Unlock()
	var one [8]byte
	one[0] = 1
	_, _ = unix.Write(r.closeFD, one[:])
	r.helpers.Wait()
	clear(r.prepared)
	r.prepared = r.prepared[:0]
	if r.reg.buffers != nil {
		r.reg.dropBuffers()
	}
	return unix.Close(r.closeFD)
}

// errnoValue extracts the errno from err, or EIO when err is not one.
func errnoValue(err error) syscall.Errno {
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return unix.EIO
}

// errnoOf turns a positive errno number into an error.
func errnoOf(n int32) error { return syscall.Errno(n) }
