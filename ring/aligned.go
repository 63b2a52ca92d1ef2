package ring

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DefaultBlockSize is the logical block size assumed when the kernel cannot
// tell (4096 bytes: safe for O_DIRECT on this machine, design/NOTES.md).
const DefaultBlockSize = 4096

// AlignedBuffer returns size bytes of zeroed, page-aligned memory from an
// anonymous private mmap, for O_DIRECT staging buffers (design/NOTES.md,
// "O_DIRECT from Go"). The memory is outside the Go heap: it never moves, is
// never collected and needs no pinning when handed to a Ring. size must be
// positive; the returned slice has len size and cap rounded up to whole
// pages. Release it with FreeAligned (passing a slice with the same start and
// cap), exactly once, after every op using it has completed.
// Errors: ErrInvalidOp for size <= 0; the mmap errno, wrapped.
func AlignedBuffer(size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: aligned buffer size %d", ErrInvalidOp, size)
	}
	page := os.Getpagesize()
	mapped := (size + page - 1) / page * page
	b, err := unix.Mmap(-1, 0, mapped, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("ring: mmap %d bytes: %w", mapped, err)
	}
	return b[:size], nil
}

// FreeAligned unmaps a buffer returned by AlignedBuffer. Using b afterwards
// faults. Errors: the munmap errno, wrapped (EINVAL for a foreign slice).
func FreeAligned(b []byte) error {
	if cap(b) == 0 {
		return nil
	}
	if err := unix.Munmap(b[:cap(b)]); err != nil {
		return fmt.Errorf("ring: munmap: %w", err)
	}
	return nil
}

// BlockSize returns the alignment in bytes that O_DIRECT I/O on fd needs for
// file offsets and lengths: statx STATX_DIOALIGN (Linux 6.1+) for regular
// files, the BLKSSZGET ioctl for block devices, else DefaultBlockSize when
// the kernel cannot tell (or the file does not support O_DIRECT). It never
// fails: a failed query yields the default.
func BlockSize(fd int) int {
	var st unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN|unix.STATX_TYPE, &st)
	if err == nil {
		if st.Mode&unix.S_IFMT == unix.S_IFBLK {
			if n, err := unix.IoctlGetInt(fd, unix.BLKSSZGET); err == nil && n > 0 {
				return n
			}
		}
		if st.Mask&unix.STATX_DIOALIGN != 0 && st.Dio_offset_align > 0 {
			return int(max(st.Dio_offset_align, st.Dio_mem_align))
		}
	}
	return DefaultBlockSize
}

// unsafePointer returns the address of b's first byte (for alignment checks).
func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }
