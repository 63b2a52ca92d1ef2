package ring

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Registrar is implemented by both backends (assert it on a Ring): it
// registers files and buffers once so that ops can name them by index
// (Op.Fixed, OpWriteFixed/OpReadFixed). On io_uring this is
// IORING_REGISTER_FILES / IORING_REGISTER_BUFFERS: the kernel skips the file
// table lookup and reference count, and the page pinning, of each op. The
// syscall backend keeps the same tables and resolves them itself, so callers
// write one code path. Owner goroutine only; no op may be in flight.
type Registrar interface {
	// RegisterFiles makes fds[i] reachable as index i (Op.Fixed). The fds stay
	// owned by the caller and must stay open while registered.
	// Errors: ErrInvalidOp when files are registered already, fds is empty
	// or ops are in flight; the kernel errno, wrapped.
	RegisterFiles(fds []int32) error
	// UnregisterFiles drops the file table. Errors: ErrInvalidOp when none or
	// ops are in flight; the kernel errno, wrapped.
	UnregisterFiles() error
	// RegisterBuffers makes bufs[i] usable as BufIndex i (at most 16384
	// buffers of at most 1 GiB each). Go-heap buffers are pinned until
	// UnregisterBuffers or Close; memory from AlignedBuffer needs no pinning.
	// Errors: ErrInvalidOp (already registered, empty, too many, an empty
	// buffer, ops in flight); the kernel errno wrapped (ENOMEM: RLIMIT_MEMLOCK).
	RegisterBuffers(bufs [][]byte) error
	// UnregisterBuffers drops the buffer table and unpins its buffers.
	UnregisterBuffers() error
}

// maxRegisteredBuffers is the kernel's limit on registered buffers.
const maxRegisteredBuffers = 1 << 14

// registry holds the tables both backends keep for registered files and
// buffers (the syscall backend resolves ops through it).
type registry struct {
	files   []int32
	buffers [][]byte
	pinner  runtime.Pinner
}

func (g *registry) checkFiles(fds []int32, inFlight bool) error {
	switch {
	case g.files != nil:
		return fmt.Errorf("%w: files already registered", ErrInvalidOp)
	case len(fds) == 0:
		return fmt.Errorf("%w: no files to register", ErrInvalidOp)
	case inFlight:
		return fmt.Errorf("%w: register files with ops in flight", ErrInvalidOp)
	}
	return nil
}

func (g *registry) checkBuffers(bufs [][]byte, inFlight bool) error {
	switch {
	case g.buffers != nil:
		return fmt.Errorf("%w: buffers already registered", ErrInvalidOp)
	case len(bufs) == 0 || len(bufs) > maxRegisteredBuffers:
		return fmt.Errorf("%w: %d buffers (want 1..%d)", ErrInvalidOp, len(bufs), maxRegisteredBuffers)
	case inFlight:
		return fmt.Errorf("%w: register buffers with ops in flight", ErrInvalidOp)
	}
	for i, b := range bufs {
		if len(b) == 0 || len(b) > 1<<30 {
			return fmt.Errorf("%w: buffer %d has %d bytes (want 1..1 GiB)", ErrInvalidOp, i, len(b))
		}
	}
	return nil
}

// keepBuffers records bufs and pins the Go-heap ones.
func (g *registry) keepBuffers(bufs [][]byte) {
	g.buffers = append([][]byte(nil), bufs...)
	for _, b := range g.buffers {
		g.pinner.Pin(&b[0])
	}
}

func (g *registry) dropBuffers() {
	g.pinner.Unpin()
	g.buffers = nil
}

// resolve maps op's FD and fixed buffer through the tables, for the syscall
// backend. It returns the descriptor, or -errno for the completion.
func (g *registry) resolve(op *Op) (int, int32) {
	fd := int(op.FD)
	if op.Fixed {
		if op.FD < 0 || int(op.FD) >= len(g.files) {
			return -1, -int32(unix.EBADF)
		}
		fd = int(g.files[op.FD])
	}
	if op.Code == OpWriteFixed || op.Code == OpReadFixed {
		if int(op.BufIndex) >= len(g.buffers) || !inside(op.Buf, g.buffers[op.BufIndex]) {
			return -1, -int32(unix.EFAULT)
		}
	}
	return fd, 0
}

// inside reports whether b lies within outer's memory.
func inside(b, outer []byte) bool {
	if len(b) == 0 {
		return true
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(outer)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return at >= start && at+uintptr(len(b)) <= start+uintptr(len(outer))
}

// RegisterFiles implements Registrar for the syscall backend.
func (r *syscallRing) RegisterFiles(fds []int32) error {
	if err := r.reg.checkFiles(fds, r.busy()); err != nil {
		return err
	}
	r.reg.files = append([]int32(nil), fds...)
	return nil
}

// UnregisterFiles implements Registrar for the syscall backend.
func (r *syscallRing) UnregisterFiles() error {
	if r.reg.files == nil || r.busy() {
		return fmt.Errorf("%w: no files registered, or ops in flight", ErrInvalidOp)
	}
	r.reg.files = nil
	return nil
}

// RegisterBuffers implements Registrar for the syscall backend.
func (r *syscallRing) RegisterBuffers(bufs [][]byte) error {
	if err := r.reg.checkBuffers(bufs, r.busy()); err != nil {
		return err
	}
	r.reg.keepBuffers(bufs)
	return nil
}

// UnregisterBuffers implements Registrar for the syscall backend.
func (r *syscallRing) UnregisterBuffers() error {
	if r.reg.buffers == nil || r.busy() {
		return fmt.Errorf("%w: no buffers registered, or ops in flight", ErrInvalidOp)
	}
	r.reg.dropBuffers()
	return nil
}

func (r *syscallRing) busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight > 0
}

// RegisterFiles implements Registrar with IORING_REGISTER_FILES.
func (r *uringRing) RegisterFiles(fds []int32) error {
	if err := r.reg.checkFiles(fds, r.busy()); err != nil {
		return err
	}
	if err := register(r.fd, registerFiles, unsafe.Pointer(&fds[0]), uint32(len(fds))); err != nil {
		return fmt.Errorf("ring: IORING_REGISTER_FILES: %w", err)
	}
	r.reg.files = append([]int32(nil), fds...)
	return nil
}

// UnregisterFiles implements Registrar with IORING_UNREGISTER_FILES.
func (r *uringRing) UnregisterFiles() error {
	if r.reg.files == nil || r.busy() {
		return fmt.Errorf("%w: no files registered, or ops in flight", ErrInvalidOp)
	}
	if err := register(r.fd, unregisterFiles, nil, 0); err != nil {
		return fmt.Errorf("ring: IORING_UNREGISTER_FILES: %w", err)
	}
	r.reg.files = nil
	return nil
}

// RegisterBuffers implements Registrar with IORING_REGISTER_BUFFERS.
func (r *uringRing) RegisterBuffers(bufs [][]byte) error {
	if err := r.reg.checkBuffers(bufs, r.busy()); err != nil {
		return err
	}
	iov := fillIovecs(make([]unix.Iovec, 0, len(bufs)), bufs)
	r.reg.keepBuffers(bufs)
	err := register(r.fd, registerBuffers, unsafe.Pointer(&iov[0]), uint32(len(iov)))
	runtime.KeepAlive(iov)
	if err != nil {
		r.reg.dropBuffers()
		return fmt.Errorf("ring: IORING_REGISTER_BUFFERS: %w", err)
	}
	return nil
}

// UnregisterBuffers implements Registrar with IORING_UNREGISTER_BUFFERS.
func (r *uringRing) UnregisterBuffers() error {
	if r.reg.buffers == nil || r.busy() {
		return fmt.Errorf("%w: no buffers registered, or ops in flight", ErrInvalidOp)
	}
	if err := register(r.fd, unregisterBuffers, nil, 0); err != nil {
		return fmt.Errorf("ring: IORING_UNREGISTER_BUFFERS: %w", err)
	}
	r.reg.dropBuffers()
	return nil
}

// busy reports whether any op is prepared or in flight.
func (r *uringRing) busy() bool { return len(r.free) < len(r.slots) }

var (
	_ Registrar = (*syscallRing)(nil)
	_ Registrar = (*uringRing)(nil)
)
