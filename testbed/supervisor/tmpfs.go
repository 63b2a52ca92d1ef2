package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ErrMountRefused: the machine does not let this process mount (not root, no CAP_SYS_ADMIN,
// no mount binary). Tests skip on it, or fail under CI=true (SkipOrFail).
var ErrMountRefused = errors.New("supervisor: mount refused")

// mountTimeout bounds each mount and umount command.
const mountTimeout = 30 * time.Second

// MountTmpfs mounts a tmpfs of sizeBytes (the kernel rounds up to whole pages) at dir
// (created when missing) with `mount -t tmpfs -o size=N tmpfs DIR`, so writes past the size
// fail with ENOSPC. It returns the unmount function (`umount DIR`, falling back to a lazy
// `umount -l` when busy; idempotent). Errors: ErrMountRefused
// (wrapping mount's output) when not permitted; a bad size (< 4096).
func MountTmpfs(dir string, sizeBytes int64) (unmount func() error, err error) {
	if sizeBytes < 4096 {
		return nil, fmt.Errorf("supervisor: tmpfs size %d < 4096 bytes", sizeBytes)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out, err := run("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(sizeBytes, 10), "tmpfs", dir)
	if err != nil {
		return nil, fmt.Errorf("%w: mount tmpfs at %s: %v: %s", ErrMountRefused, dir, err, strings.TrimSpace(out))
	}
	done := false
	return func() error {
		if done {
			return nil
		}
		if _, err := run("umount", dir); err == nil {
			done = true
			return nil
		}
		out, err := run("umount", "-l", dir)
		if err != nil {
			return fmt.Errorf("supervisor: umount %s: %v: %s", dir, err, strings.TrimSpace(out))
		}
		done = true
		return nil
	}, nil
}

// MountTmpfsForTest mounts a tmpfs of sizeBytes at a fresh directory under t.TempDir() and
// unmounts it at t's cleanup (before the temp dir is removed); it returns the mount point. When mounting
// is refused it skips t, or fails it under CI=true (SkipOrFail); other errors fail t.
func MountTmpfsForTest(t testing.TB, sizeBytes int64) string {
	t.Helper()
	dir := t.TempDir() + "/tmpfs"
	unmount, err := MountTmpfs(dir, sizeBytes)
	if errors.Is(err, ErrMountRefused) {
		SkipOrFail(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unmount(); err != nil {
			t.Error(err)
		}
	})
	return dir
}

// SkipOrFail skips t with the message, or fails it (Fatalf) when CI=true: under CI every
// fault the test bed offers must run.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: "+format, args...)
	}
	t.Skipf(format, args...)
}

// run runs a command bounded by mountTimeout and returns its combined output.
func run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), mountTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}
