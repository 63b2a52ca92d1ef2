package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The file sets what env does not (both key spellings), --print-config says "file", a bad
// key names the line, and a typo'd variable is one warning with the closest known one.
func TestControlPlaneConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.yml")
	if err := os.WriteFile(path, []byte("controlplane_node_id: cp7\nFELIX_CONTROLPLANE_CHANGES_LIMIT: 50\ncontrolplane_bind: 127.0.0.1:9443\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"FELIX_CONTROLPLANE_CONFIG": path, "FELIX_CONTROLPLANE_BIND": "127.0.0.1:9543"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var warn bytes.Buffer
	cfg, err := loadConfigFile(lookup, []string{"FELIX_CONTROLPLANE_NODE_IDD=x", "FELIX_SERVER=y"}, &warn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.nodeID != "cp7" || cfg.changesLimit != 50 || cfg.bind != "127.0.0.1:9543" {
		t.Fatalf("node %q limit %d bind %q", cfg.nodeID, cfg.changesLimit, cfg.bind)
	}
	if cfg.sources["FELIX_CONTROLPLANE_NODE_ID"] != "file" || cfg.sources["FELIX_CONTROLPLANE_BIND"] != "env" {
		t.Fatalf("sources: %v", cfg.sources)
	}
	if w := warn.String(); strings.Count(w, "warning") != 1 || !strings.Contains(w, "FELIX_CONTROLPLANE_NODE_IDD") ||
		!strings.Contains(w, "did you mean FELIX_CONTROLPLANE_NODE_ID?") {
		t.Fatalf("warnings: %q", w)
	}
	if err := os.WriteFile(path, []byte("\ncontrolplane_bnd: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfigFile(lookup, nil, &warn); err == nil || !strings.Contains(err.Error(), "cp.yml:2: unknown key") {
		t.Fatalf("unknown key: %v", err)
	}
	env["FELIX_CONTROLPLANE_CONFIG"] = filepath.Join(t.TempDir(), "missing.yml")
	if _, err := loadConfigFile(lookup, nil, &warn); err == nil || !strings.Contains(err.Error(), "missing.yml") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestControlPlaneVersion(t *testing.T) {
	var out bytes.Buffer
	if !printVersion([]string{"--version"}, &out) || !strings.HasPrefix(out.String(), "felix-controlplane ") {
		t.Fatalf("--version: %q", out.String())
	}
	if printVersion([]string{"--print-config"}, &out) {
		t.Fatal("--print-config taken for --version")
	}
}
