package supervisor

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// PeakRSS returns the peak resident set size of process pid in bytes: VmHWM of
// /proc/<pid>/status (kB there). Errors: the process is gone or unreadable (wrapping
// fs.ErrNotExist when /proc/<pid> no longer exists), or the line is malformed.
func PeakRSS(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fields := strings.Fields(rest)
			if len(fields) != 2 || fields[1] != "kB" {
				return 0, fmt.Errorf("supervisor: VmHWM line %q", line)
			}
			kb, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("supervisor: VmHWM line %q: %w", line, err)
			}
			return kb << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	// A zombie has no memory lines.
	return 0, fmt.Errorf("supervisor: no VmHWM in /proc/%d/status", pid)
}

// procState returns the one-letter state of pid from /proc/<pid>/stat (R running, S
// sleeping, D disk sleep, T stopped, t tracing stop, Z zombie, ...).
func procState(pid int) (byte, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses, so cut at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("supervisor: /proc/%d/stat: %q", pid, b)
	}
	return b[i+2], nil
}

// stopped reports whether a /proc state letter is a job-control or tracing stop.
func stopped(state byte) bool { return state == 'T' || state == 't' }
