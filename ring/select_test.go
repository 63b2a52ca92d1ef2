package ring

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"golang.org/x/sys/unix"
)

func TestOptionsForceSyscallBackend(t *testing.T) {
	r, err := New(Options{Backend: "Syscall"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Backend() != BackendSyscall {
		t.Fatalf("Backend() = %q with Options.Backend syscall", r.Backend())
	}
	if Backend() == "" || BackendReason() == "" {
		t.Fatalf("process choice not recorded: %q, %q", Backend(), BackendReason())
	}
	var out bytes.Buffer
	metrics.WritePrometheus(&out, false)
	if !strings.Contains(out.String(), `felix_io_backend{backend="`+Backend()+`"`) {
		t.Fatalf("gauge felix_io_backend missing from:\n%s", out.String())
	}
}

// ring reads no environment (issue 14 item 4): FELIX_IO_BACKEND is the
// broker's setting, passed in Options.Backend.
func TestEnvIsNotRead(t *testing.T) {
	t.Setenv(EnvBackend, "uring")
	r, err := New(Options{Backend: BackendSyscall})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Backend() != BackendSyscall {
		t.Fatalf("Backend() = %q, want the Options choice", r.Backend())
	}
	t.Setenv(EnvBackend, "bogus")
	r2, err := New(Options{Entries: 4})
	if err != nil {
		t.Fatalf("New with %s=bogus in the environment: %v", EnvBackend, err)
	}
	r2.Close()
}

func TestAutoPicksAWorkingBackend(t *testing.T) {
	t.Setenv(EnvBackend, "")
	r, err := New(Options{Entries: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, uerr := newUringProbeOnly(); uerr == nil && r.Backend() != BackendUring {
		t.Fatalf("io_uring works here but auto chose %q", r.Backend())
	}
}

// newUringProbeOnly reports whether a uring ring can be built here.
func newUringProbeOnly() (bool, error) {
	r, err := newUring(4, false)
	if err != nil {
		return false, err
	}
	return true, r.Close()
}

// kernelAtLeast compares the running kernel's release with major.minor.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var maj, mnr int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &maj, &mnr); err != nil {
		return false
	}
	return maj > major || maj == major && mnr >= minor
}

func TestBadBackendAndEntries(t *testing.T) {
	t.Setenv(EnvBackend, "")
	if _, err := New(Options{Backend: "epoll"}); !errors.Is(err, ErrBadBackend) {
		t.Fatalf("New(epoll) = %v, want ErrBadBackend", err)
	}
	for _, n := range []uint32{3, 65536} {
		if _, err := New(Options{Entries: n}); !errors.Is(err, ErrInvalidOp) {
			t.Fatalf("New(Entries %d) = %v, want ErrInvalidOp", n, err)
		}
	}
}

func TestRefusalIsExplained(t *testing.T) {
	for _, c := range []struct {
		errno unix.Errno
		label string
	}{{unix.ENOSYS, "enosys"}, {unix.ENOMEM, "enomem"}} {
		err := refusal(c.errno)
		if !errors.Is(err, ErrUnsupported) || !errors.Is(err, c.errno) {
			t.Fatalf("refusal(%v) = %v: want ErrUnsupported and the errno", c.errno, err)
		}
		if got := reasonLabel(err); got != c.label {
			t.Fatalf("reasonLabel(%v) = %q, want %q", err, got, c.label)
		}
	}
	err := refusal(unix.EPERM) // seccomp or the sysctl, whichever holds here
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "io_uring_setup") {
		t.Fatalf("refusal(EPERM) = %v", err)
	}
	if got := reasonLabel(err); got != "eperm" && got != "io_uring_disabled" {
		t.Fatalf("reasonLabel(EPERM) = %q", got)
	}
	if err := refusal(unix.EFAULT); errors.Is(err, ErrUnsupported) {
		t.Fatalf("EFAULT must not read as a refusal: %v", err)
	}
	if got := reasonLabel(ErrUnsupported); got != "missing_feature" {
		t.Fatalf("reasonLabel(feature) = %q", got)
	}
}

func TestThreadLockedUsesDeferTaskrun(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := newUring(8, true)
	if errors.Is(err, ErrUnsupported) {
		skipRefused(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := uint32(setupSingleIssuer | setupDeferTaskrun)
	if kernelAtLeast(6, 1) && r.setupFlags&want != want {
		t.Fatalf("kernel 6.1+ but setup flags %#x lack SINGLE_ISSUER|DEFER_TASKRUN", r.setupFlags)
	}
	if r.setupFlags&setupCQSize == 0 {
		t.Fatalf("setup flags %#x lack CQSIZE", r.setupFlags)
	}
	if uint32(len(r.cqes)) < 2*uint32(len(r.sqes)) || len(r.slots) != 16 {
		t.Fatalf("cq %d sq %d slots %d", len(r.cqes), len(r.sqes), len(r.slots))
	}
}
