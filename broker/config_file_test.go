package broker

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeConfigFile writes a FELIX_BROKER_CONFIG file and returns its path.
func writeConfigFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The file's keys are the spec's yaml keys and the variables' names; env wins over the
// file and flags over env; --print-config names "file" as the source (issue 23 item 11).
func TestConfigFileUnderEnvAndFlags(t *testing.T) {
	path := writeConfigFile(t, "# broker\nquic_bind: 127.0.0.1:7100\nmetrics_bind: \"127.0.0.1:7101\"\n"+
		"FELIX_LOG_LEVEL: debug\ndurable_fsync_mode: periodic\nmax_shards: 64\n")
	cfg, _, err := LoadConfig([]string{"--max-shards", "32"}, envOf(map[string]string{
		"FELIX_BROKER_CONFIG": path, "FELIX_DURABLE_FSYNC_MODE": "none"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QUICBind != "127.0.0.1:7100" || cfg.MetricsBind != "127.0.0.1:7101" || cfg.LogLevel != "debug" {
		t.Fatalf("file values not applied: %+v", cfg)
	}
	if cfg.FsyncMode != FsyncNone || cfg.SourceOf("FELIX_DURABLE_FSYNC_MODE") != SourceEnv {
		t.Fatalf("env must win over the file: %s (%s)", cfg.FsyncMode, cfg.SourceOf("FELIX_DURABLE_FSYNC_MODE"))
	}
	if cfg.MaxShards != 32 || cfg.SourceOf("FELIX_MAX_SHARDS") != SourceFlag {
		t.Fatalf("the flag must win: %d (%s)", cfg.MaxShards, cfg.SourceOf("FELIX_MAX_SHARDS"))
	}
	var out bytes.Buffer
	if err := cfg.PrintConfig(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "127.0.0.1:7100") || !strings.Contains(out.String(), " file ") {
		t.Fatalf("--print-config lacks the file source:\n%s", out.String())
	}
}

// Every problem in the file is a configuration error naming the file and line.
func TestConfigFileErrors(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"unknown key":  {"quic_bnd: 127.0.0.1:1\n", `config.yml:1: unknown key "quic_bnd"; did you mean "quic_bind"?`},
		"bad value":    {"\nauth: maybe\n", `config.yml:2: auth="maybe"`},
		"twice":        {"quic_bind: 127.0.0.1:1\nFELIX_QUIC_BIND: 127.0.0.1:2\n", `config.yml:2: "FELIX_QUIC_BIND" sets FELIX_QUIC_BIND again (line 1)`},
		"nested":       {"broker:\n  quic_bind: x\n", "config.yml:2: an indented line"},
		"not a scalar": {"quic_bind: [a]\n", "config.yml:1:"},
	} {
		path := writeConfigFile(t, tc.text)
		_, _, err := LoadConfig(nil, envOf(map[string]string{"FELIX_BROKER_CONFIG": path}))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrConfig with %q", name, err, tc.want)
		}
	}
	_, _, err := LoadConfig(nil, envOf(map[string]string{"FELIX_BROKER_CONFIG": filepath.Join(t.TempDir(), "none.yml")}))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "none.yml") {
		t.Errorf("missing file: %v", err)
	}
}

// A set variable the broker does not read, a few edits from one it does, is reported with
// the closest; the CLI's variables and far-off names are not.
func TestEnvTypos(t *testing.T) {
	got := EnvTypos([]string{"FELIX_QUIC_BND=1", "FELIX_DURABLE_FSYNC_MODE=none", "FELIX_SERVER=x", "FELIX_TOKEN=t",
		"FELIX_E2E_RSS_MIB=512", "FELIX_DURABLE_STORAGE_DIRS=/d"})
	if len(got) != 2 || got[0].Name != "FELIX_DURABLE_STORAGE_DIRS" || got[0].Closest != "FELIX_DURABLE_STORAGE_DIR" ||
		got[1].Name != "FELIX_QUIC_BND" || got[1].Closest != "FELIX_QUIC_BIND" {
		t.Fatalf("typos: %+v", got)
	}
}
