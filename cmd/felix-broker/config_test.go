package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// FELIX_BROKER_CONFIG's file sets what env does not; a typo'd variable is one warning
// naming it and the closest known one (issue 23 item 11).
func TestConfigFileAndTypoWarning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(path, []byte("quic_bind: 127.0.0.1:7201\nmax_shards: 64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(brokerBin, "--print-config")
	cmd.Env = append(os.Environ(), "FELIX_BROKER_CONFIG="+path, "FELIX_MAX_SHARDS=32", "FELIX_DURABLE_FSNYC_MODE=none")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("--print-config: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"127.0.0.1:7201  file", "FELIX_MAX_SHARDS                          32"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("--print-config lacks %q:\n%s", want, out)
		}
	}
	warn := stderr.String()
	if strings.Count(warn, "FELIX_DURABLE_FSNYC_MODE") == 0 || !strings.Contains(warn, "did you mean FELIX_DURABLE_FSYNC_MODE?") ||
		strings.Count(warn, "unknown variable") != 1 {
		t.Fatalf("typo warning: %q", warn)
	}
}
