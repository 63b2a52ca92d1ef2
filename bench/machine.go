package bench

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Machine is what a report says about where it ran.
type Machine struct {
	Type      string `json:"type"` // always "machine" in the JSON lines
	CPUModel  string `json:"cpu_model"`
	Cores     int    `json:"cores"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
	GitCommit string `json:"git_commit"` // "<sha>" or "<sha>-dirty"
	Host      string `json:"host"`
	// LoadAvg is /proc/loadavg's 1, 5 and 15 minute load when the facts were read: on a
	// shared machine it says how much else competed for the cores.
	LoadAvg string    `json:"load_avg"`
	Date    time.Time `json:"date"`
}

// ReadMachine gathers the machine facts: /proc/cpuinfo's model name, the CPUs this
// process may use, uname's release, the Go runtime version and repoRoot's git commit
// ("unknown" where a fact cannot be read).
func ReadMachine(repoRoot string) Machine {
	m := Machine{Type: "machine", CPUModel: "unknown", Cores: runtime.NumCPU(), Kernel: "unknown",
		GoVersion: runtime.Version(), GitCommit: "unknown", Date: time.Now().UTC()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	m.Host, _ = os.Hostname()
	m.LoadAvg = ReadLoadAvg()
	if out, err := exec.Command("git", "-C", repoRoot, "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		m.GitCommit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "-C", repoRoot, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			m.GitCommit += "-dirty"
		}
	}
	return m
}

// ReadLoadAvg returns /proc/loadavg's 1, 5 and 15 minute load averages ("" when unreadable).
func ReadLoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
