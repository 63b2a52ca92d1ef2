package broker

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestConfigDefaultsEnvFlags(t *testing.T) {
	cfg, printCfg, err := LoadConfig([]string{"--quic-bind", "127.0.0.1:0", "--print-config"},
		envOf(map[string]string{"FELIX_BROKER_METRICS_BIND": "127.0.0.1:9090", "FELIX_QUIC_BIND": "127.0.0.1:7000"}))
	if err != nil {
		t.Fatal(err)
	}
	if !printCfg {
		t.Fatal("--print-config not reported")
	}
	checks := []struct {
		env, value string
		src        Source
	}{
		{"FELIX_QUIC_BIND", cfg.QUICBind, SourceFlag},
		{"FELIX_BROKER_METRICS_BIND", cfg.MetricsBind, SourceEnv},
		{"FELIX_DURABLE_STORAGE_DIR", cfg.DataDir, SourceDefault},
	}
	want := map[string]string{"FELIX_QUIC_BIND": "127.0.0.1:0", "FELIX_BROKER_METRICS_BIND": "127.0.0.1:9090", "FELIX_DURABLE_STORAGE_DIR": "./felix-data"}
	for _, c := range checks {
		if c.value != want[c.env] || cfg.SourceOf(c.env) != c.src {
			t.Errorf("%s = %q from %s, want %q from %s", c.env, c.value, cfg.SourceOf(c.env), want[c.env], c.src)
		}
	}
	if cfg.FsyncMode != FsyncOnCommit || !cfg.Auth || cfg.AutoCreate {
		t.Errorf("single-node defaults: fsync=%s auth=%v autocreate=%v", cfg.FsyncMode, cfg.Auth, cfg.AutoCreate)
	}
	var out bytes.Buffer
	cfg.PrintConfig(&out)
	for _, s := range settings() {
		if !strings.Contains(out.String(), s.env) {
			t.Errorf("--print-config misses %s", s.env)
		}
	}
	if !strings.Contains(out.String(), "127.0.0.1:9090  env") && !strings.Contains(out.String(), "env") {
		t.Errorf("sources not printed:\n%s", out.String())
	}
}

func TestConfigInvalidValuesNameTheVariable(t *testing.T) {
	cases := []struct {
		env  map[string]string
		args []string
		name string
	}{
		{map[string]string{"FELIX_DURABLE_FSYNC_MODE": "sometimes"}, nil, "FELIX_DURABLE_FSYNC_MODE"},
		{map[string]string{"FELIX_QUIC_BIND": "nonsense"}, nil, "FELIX_QUIC_BIND"},
		{map[string]string{"FELIX_AUTH": "maybe"}, nil, "FELIX_AUTH"},
		{map[string]string{"FELIX_MAX_FRAME_BYTES": "12x"}, nil, "FELIX_MAX_FRAME_BYTES"},
		{nil, []string{"--auto-create", "perhaps"}, "FELIX_AUTO_CREATE"},
		{map[string]string{"FELIX_TLS_CERT": "c.pem"}, nil, "FELIX_TLS_KEY"},
		{map[string]string{"FELIX_BROKER_CONFIG": "/etc/felix.yml"}, nil, "FELIX_BROKER_CONFIG"},
		{nil, []string{"--no-such-flag"}, "no-such-flag"},
		{map[string]string{"FELIX_QUIC_BIND": "127.0.0.1:99999"}, nil, "FELIX_QUIC_BIND"},
		{map[string]string{"FELIX_BROKER_METRICS_BIND": "127.0.0.1:-1"}, nil, "FELIX_BROKER_METRICS_BIND"},
		{map[string]string{"FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS": "0"}, nil, "FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS"},
		{map[string]string{"FELIX_MAX_FRAME_BYTES": "1023"}, nil, "FELIX_MAX_FRAME_BYTES"},
		{map[string]string{"FELIX_IO_BACKEND": "bogus"}, nil, "FELIX_IO_BACKEND"},
		{map[string]string{"FELIX_CORES": "abc"}, nil, "FELIX_CORES"},
		{map[string]string{"FELIX_CORES": "0"}, nil, "FELIX_CORES"},
		{nil, []string{"--io-backend", "bogus"}, "FELIX_IO_BACKEND"},
	}
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct {
		env  map[string]string
		args []string
		name string
	}{map[string]string{"FELIX_READY_FILE": filepath.Join(notDir, "sub", "ready.json")}, nil, "FELIX_READY_FILE"})
	for _, c := range cases {
		_, _, err := LoadConfig(c.args, envOf(c.env))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%v %v: err = %v, want ErrConfig naming %s", c.env, c.args, err, c.name)
		}
	}
}

func TestConfigFsyncAliasesAndIntervalImpliesPeriodic(t *testing.T) {
	for alias, want := range map[string]FsyncMode{"off": FsyncNone, "commit": FsyncOnCommit, "On-Commit": FsyncOnCommit, "periodic": FsyncPeriodic} {
		cfg, _, err := LoadConfig(nil, envOf(map[string]string{"FELIX_DURABLE_FSYNC_MODE": alias}))
		if err != nil || cfg.FsyncMode != want {
			t.Errorf("%s: %v %v", alias, cfg, err)
		}
	}
	cfg, _, err := LoadConfig(nil, envOf(map[string]string{"FELIX_DURABLE_FSYNC_INTERVAL_MS": "100"}))
	if err != nil || cfg.FsyncMode != FsyncPeriodic {
		t.Fatalf("interval alone: mode %s err %v", cfg.FsyncMode, err)
	}
}

// docs/operations.md must list every setting (the table there is generated from settings()).
func TestOperationsDocListsEverySetting(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatalf("docs/operations.md: %v", err)
	}
	for _, s := range settings() {
		if !strings.Contains(string(doc), "`"+s.env+"`") || !strings.Contains(string(doc), "`--"+s.flag+"`") {
			t.Errorf("docs/operations.md does not list %s / --%s", s.env, s.flag)
		}
	}
}

func TestConfigEngineSettingsPrintedAndPassed(t *testing.T) {
	cfg, _, err := LoadConfig([]string{"--cores", "2", "--max-frame-bytes", "1024"}, envOf(map[string]string{"FELIX_IO_BACKEND": "syscall"}))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cfg.PrintConfig(&out)
	for _, want := range []string{"FELIX_CORES", "FELIX_IO_BACKEND", "syscall"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--print-config misses %q:\n%s", want, out.String())
		}
	}
	// The engine reads no environment: the values reach core.Config through the Config.
	if cfg.EngineCores() != 2 || cfg.IOBackend != "syscall" {
		t.Errorf("engine cores %d, backend %q; want the flag value 2 and syscall", cfg.EngineCores(), cfg.IOBackend)
	}
	cfg, _, err = LoadConfig([]string{"--core-shards", "3"}, envOf(map[string]string{"FELIX_CORES": "2"}))
	if err != nil || cfg.EngineCores() != 3 {
		t.Errorf("FELIX_CORE_SHARDS 3 over FELIX_CORES 2: %d cores, %v", cfg.EngineCores(), err)
	}
	if cfg, _, err = LoadConfig(nil, envOf(nil)); err != nil || cfg.EngineCores() != 0 {
		t.Errorf("defaults: %d cores (want 0, one per CPU), %v", cfg.EngineCores(), err)
	}
}

func TestConfigReadyFileInMissingDirIsAccepted(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "a", "b", "ready.json")
	if _, _, err := LoadConfig(nil, envOf(map[string]string{"FELIX_READY_FILE": ready})); err != nil {
		t.Fatalf("creatable directory refused: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(ready)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("LoadConfig created %s (must only check): %v", filepath.Dir(ready), err)
	}
}
