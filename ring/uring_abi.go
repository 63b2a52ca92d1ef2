package ring

// Kernel ABI of io_uring (include/uapi/linux/io_uring.h), restricted to what
// this package uses. Layouts are the kernel's; amd64 and arm64 are
// little-endian with natural alignment, matching these Go structs.

// io_uring_setup flags.
const (
	setupCQSize       = 1 << 3
	setupCoopTaskrun  = 1 << 8
	setupTaskrunFlag  = 1 << 9
	setupSingleIssuer = 1 << 12
	setupDeferTaskrun = 1 << 13
)

// io_uring_params.features bits.
const (
	featSingleMmap = 1 << 0
	featNoDrop     = 1 << 1
	featExtArg     = 1 << 8
)

// io_uring_enter flags.
const (
	enterGetEvents = 1 << 0
	enterExtArg    = 1 << 3
)

// sq_ring flags word bits.
const sqTaskrun = 1 << 2

// mmap offsets.
const (
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000
)

// Opcodes (enum io_uring_op).
const (
	opNop         = 0
	opReadv       = 1
	opWritev      = 2
	opFsync       = 3
	opReadFixed   = 4
	opWriteFixed  = 5
	opPollAdd     = 6
	opTimeout     = 11
	opAsyncCancel = 14
	opFallocate   = 17
	opRead        = 22
	opWrite       = 23
)

// SQE flags.
const (
	sqeFixedFile = 1 << 0
	sqeIOLink    = 1 << 2
)

// rw_flags: RWF_DSYNC (linux/fs.h), a per-write O_DSYNC (Op.DSync).
const rwfDSync = 0x2

// fsync_flags.
const fsyncDatasync = 1

// io_uring_register opcodes.
const (
	registerBuffers   = 0
	unregisterBuffers = 1
	registerFiles     = 2
	unregisterFiles   = 3
	registerProbe     = 8
)

// probe op flag: IO_URING_OP_SUPPORTED.
const probeOpSupported = 1

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// uringParams is struct io_uring_params (120 bytes).
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// sqe is struct io_uring_sqe (64 bytes).
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	opFlags     uint32 // rw_flags, fsync_flags, poll32_events, timeout_flags, cancel_flags
	userData    uint64
	bufIndex    uint16
	personality uint16
	fileIndex   int32
	addr3       uint64
	pad         uint64
}

// cqe is struct io_uring_cqe (16 bytes).
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// kernelTimespec is struct __kernel_timespec.
type kernelTimespec struct {
	sec, nsec int64
}

// geteventsArg is struct io_uring_getevents_arg (IORING_ENTER_EXT_ARG).
type geteventsArg struct {
	sigmask     uint64
	sigmaskSize uint32
	minWaitUsec uint32
	ts          uint64
}

type probeOp struct {
	op, resv uint8
	flags    uint16
	resv2    uint32
}

// uringProbe is struct io_uring_probe with room for 256 ops.
type uringProbe struct {
	lastOp, opsLen uint8
	resv           uint16
	resv2          [3]uint32
	ops            [256]probeOp
}
