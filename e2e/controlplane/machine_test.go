package controlplane

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// loadAvg is /proc/loadavg's 1-, 5- and 15-minute load averages ("?" when unreadable):
// the machine is shared while the tests measure.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's utime and stime (100 on Linux).
const clockTicks = 100

// cpuSeconds is the user plus system CPU time of pid so far, in seconds (0 when
// /proc/<pid>/stat is unreadable).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command: state is field 3, utime 14, stime 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return float64(u+st) / clockTicks
}

// cpu renders each member's CPU seconds over all its runs ("cp1 3.1 s, ...").
func (c *cluster) cpu() string {
	parts := make([]string, len(c.members))
	for i, m := range c.members {
		sec := m.cpuBefore
		if m.proc.Running() {
			sec += cpuSeconds(m.proc.PID())
		}
		parts[i] = fmt.Sprintf("%s %.1f s", m.id, sec)
	}
	return strings.Join(parts, ", ")
}
