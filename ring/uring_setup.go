package ring

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// setupAttempts lists the io_uring_setup flag sets New tries, best first;
// each later set is tried only when the kernel answers EINVAL.
func setupAttempts(threadLocked bool) []uint32 {
	if threadLocked {
		return []uint32{setupSingleIssuer | setupDeferTaskrun, setupCoopTaskrun | setupTaskrunFlag, 0}
	}
	return []uint32{setupCoopTaskrun | setupTaskrunFlag, 0}
}

// setupRing calls io_uring_setup with sqEntries SQ entries and a CQ of
// 2*sqEntries, trying each flag set of setupAttempts.
func setupRing(sqEntries uint32, threadLocked bool) (int, uringParams, error) {
	var lastErr unix.Errno
	for _, flags := range setupAttempts(threadLocked) {
		p := uringParams{flags: flags | setupCQSize, cqEntries: 2 * sqEntries}
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(sqEntries), uintptr(unsafe.Pointer(&p)), 0)
		if errno == 0 {
			return int(fd), p, nil
		}
		lastErr = errno
		if errno != unix.EINVAL {
			break
		}
	}
	return -1, uringParams{}, refusal(lastErr)
}

// requiredOps are the opcodes the backend prepares; a kernel missing one is
// refused with the opcode named.
var requiredOps = []struct {
	code uint8
	name string
}{
	{opNop, "NOP"}, {opReadv, "READV"}, {opWritev, "WRITEV"}, {opFsync, "FSYNC"},
	{opPollAdd, "POLL_ADD"}, {opTimeout, "TIMEOUT"}, {opAsyncCancel, "ASYNC_CANCEL"},
	{opFallocate, "FALLOCATE"}, {opRead, "READ"}, {opWrite, "WRITE"},
	{opReadFixed, "READ_FIXED"}, {opWriteFixed, "WRITE_FIXED"},
}

// checkFeatures refuses kernels lacking what the backend relies on:
// IORING_FEAT_EXT_ARG (Wait timeouts, Linux 5.11), IORING_FEAT_NODROP, and
// every opcode of requiredOps (IORING_REGISTER_PROBE).
func checkFeatures(fd int, p *uringParams) error {
	if p.features&featExtArg == 0 {
		return fmt.Errorf("%w: kernel lacks IORING_FEAT_EXT_ARG (Linux 5.11+)", ErrUnsupported)
	}
	if p.features&featNoDrop == 0 {
		return fmt.Errorf("%w: kernel lacks IORING_FEAT_NODROP (Linux 5.5+)", ErrUnsupported)
	}
	probe := new(uringProbe)
	if err := register(fd, registerProbe, unsafe.Pointer(probe), uint32(len(probe.ops))); err != nil {
		return fmt.Errorf("%w: IORING_REGISTER_PROBE: %w", ErrUnsupported, err)
	}
	for _, op := range requiredOps {
		if op.code > probe.lastOp || probe.ops[op.code].flags&probeOpSupported == 0 {
			return fmt.Errorf("%w: kernel lacks IORING_OP_%s", ErrUnsupported, op.name)
		}
	}
	return nil
}

// register calls io_uring_register, retrying EINTR.
func register(fd int, opcode uint32, arg unsafe.Pointer, n uint32) error {
	for {
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(fd), uintptr(opcode), uintptr(arg), uintptr(n), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}

// ringMaps holds the shared memory of one ring.
type ringMaps struct {
	sqRing, cqRing, sqeMem []byte // cqRing aliases sqRing under FEAT_SINGLE_MMAP
}

// mapRing mmaps the SQ ring, CQ ring and SQE array of fd (one mapping for
// both rings when IORING_FEAT_SINGLE_MMAP).
func mapRing(fd int, p *uringParams) (ringMaps, error) {
	var m ringMaps
	sqSize := int(p.sqOff.array) + int(p.sqEntries)*4
	cqSize := int(p.cqOff.cqes) + int(p.cqEntries)*int(unsafe.Sizeof(cqe{}))
	single := p.features&featSingleMmap != 0
	if single {
		sqSize = max(sqSize, cqSize)
	}
	prot, flags := unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE
	var err error
	if m.sqRing, err = unix.Mmap(fd, offSQRing, sqSize, prot, flags); err != nil {
		return m, fmt.Errorf("ring: mmap SQ ring: %w", err)
	}
	m.cqRing = m.sqRing
	if !single {
		if m.cqRing, err = unix.Mmap(fd, offCQRing, cqSize, prot, flags); err != nil {
			m.unmap()
			return m, fmt.Errorf("ring: mmap CQ ring: %w", err)
		}
	}
	if m.sqeMem, err = unix.Mmap(fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), prot, flags); err != nil {
		m.unmap()
		return m, fmt.Errorf("ring: mmap SQEs: %w", err)
	}
	return m, nil
}

// unmap releases every mapping of m; errors are joined.
func (m *ringMaps) unmap() error {
	var errs []error
	if m.sqeMem != nil {
		errs = append(errs, unix.Munmap(m.sqeMem))
	}
	if m.cqRing != nil && unsafe.SliceData(m.cqRing) != unsafe.SliceData(m.sqRing) {
		errs = append(errs, unix.Munmap(m.cqRing))
	}
	if m.sqRing != nil {
		errs = append(errs, unix.Munmap(m.sqRing))
	}
	*m = ringMaps{}
	return errors.Join(errs...)
}

// word returns the shared uint32 at byte offset off of b.
func word(b []byte, off uint32) *uint32 {
	return (*uint32)(unsafe.Pointer(&b[off]))
}
