package ring

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/VictoriaMetrics/metrics"
	"golang.org/x/sys/unix"
)

// New creates a Ring with opts (docs/architecture.md, "ring"; issue 3 item 1).
//
// Backend choice: opts.Backend ("uring", "syscall", or ""/"auto"; ring reads
// no environment, the broker passes FELIX_IO_BACKEND here), and for auto:
// io_uring, falling back to the syscall backend when io_uring is refused
// (errors.Is(err, ErrUnsupported): ENOSYS on old kernels, EPERM from a
// container's seccomp profile or kernel.io_uring_disabled, EACCES, ENOMEM from
// a small RLIMIT_MEMLOCK, a missing feature or opcode). A forced "uring"
// returns the refusal instead of falling back.
//
// The first choice in the process is logged once (log/slog, with the reason)
// and exported as the gauge felix_io_backend{backend="...",reason="..."} = 1.
// Errors: ErrBadBackend for an unknown name; ErrInvalidOp for bad Entries;
// ErrUnsupported (wrapped) when uring is forced but refused; otherwise the
// errno of a failed setup step, wrapped.
func New(opts Options) (Ring, error) {
	entries := opts.Entries
	if entries == 0 {
		entries = DefaultEntries
	}
	if entries > 32768 || entries&(entries-1) != 0 {
		return nil, fmt.Errorf("%w: Entries %d is not a power of two in 1..32768", ErrInvalidOp, entries)
	}
	name, source := opts.Backend, "Options.Backend"
	switch strings.ToLower(name) {
	case BackendSyscall:
		r, err := newSyscall(entries)
		if err == nil {
			recordChoice(BackendSyscall, "forced", "forced by "+source)
		}
		return r, err
	case BackendUring:
		r, err := newUring(entries, opts.ThreadLocked)
		if err == nil {
			recordChoice(BackendUring, "forced", "forced by "+source)
		}
		return r, err
	case "", "auto":
	default:
		return nil, fmt.Errorf("%w: %q (want %q or %q)", ErrBadBackend, name, BackendUring, BackendSyscall)
	}
	r, err := newUring(entries, opts.ThreadLocked)
	if err == nil {
		recordChoice(BackendUring, "auto", "io_uring available")
		return r, nil
	}
	if !errors.Is(err, ErrUnsupported) {
		return nil, err
	}
	s, serr := newSyscall(entries)
	if serr != nil {
		return nil, serr
	}
	recordChoice(BackendSyscall, reasonLabel(err), err.Error())
	return s, nil
}

var (
	choiceOnce   sync.Once
	chosen       string
	chosenReason string
)

// recordChoice logs the process's first backend choice and exports it.
func recordChoice(backend, label, reason string) {
	choiceOnce.Do(func() {
		chosen, chosenReason = backend, reason
		slog.Info("ring: I/O backend selected", "backend", backend, "reason", reason)
		name := fmt.Sprintf(`felix_io_backend{backend=%q,reason=%q}`, backend, label)
		metrics.GetOrCreateGauge(name, func() float64 { return 1 })
	})
}

// Backend returns the backend of the first Ring created in this process
// ("uring" or "syscall"), or "" before any. Goroutine-safe after New returns.
func Backend() string { return chosen }

// BackendReason returns why Backend() was chosen, in words (for example
// "forced by Options.Backend" or the io_uring refusal), or "".
func BackendReason() string { return chosenReason }

// reasonLabel condenses a refusal into a metric label value.
func reasonLabel(err error) string {
	var errno unix.Errno
	switch {
	case errors.Is(err, errUringDisabled):
		return "io_uring_disabled"
	case errors.As(err, &errno):
		return strings.ToLower(unix.ErrnoName(errno))
	default:
		return "missing_feature"
	}
}

// errUringDisabled marks a refusal explained by kernel.io_uring_disabled.
var errUringDisabled = errors.New("kernel.io_uring_disabled is set")

// refusal wraps a setup errno as ErrUnsupported with an explanation.
func refusal(errno unix.Errno) error {
	switch errno {
	case unix.ENOSYS:
		return fmt.Errorf("%w: io_uring_setup: %w (kernel without io_uring)", ErrUnsupported, errno)
	case unix.EPERM, unix.EACCES:
		if v := readSysctl("/proc/sys/kernel/io_uring_disabled"); v != "" && v != "0" {
			return fmt.Errorf("%w: io_uring_setup: %w (%w = %s)", ErrUnsupported, errno, errUringDisabled, v)
		}
		return fmt.Errorf("%w: io_uring_setup: %w (likely a seccomp profile)", ErrUnsupported, errno)
	case unix.ENOMEM:
		return fmt.Errorf("%w: io_uring_setup: %w (RLIMIT_MEMLOCK too small?)", ErrUnsupported, errno)
	}
	return fmt.Errorf("ring: io_uring_setup: %w", errno)
}

func readSysctl(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
