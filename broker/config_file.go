package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	"felix/clock"
	"felix/internal/configfile"
)

// SourceFile marks a setting whose value came from the configuration file
// (FELIX_BROKER_CONFIG); env and flags win over it.
const SourceFile Source = "file"

// DefaultConfigFile is read when FELIX_BROKER_CONFIG is unset, if it exists
// (spec/config.md load order; a missing default file means built-in defaults).
const DefaultConfigFile = "/usr/local/felix/config.yml"

// configFileKeys maps every key a configuration file may use to its setting: the spec's
// yaml key (the flag with '_' for '-', e.g. quic_bind) and the variable's own name as
// --print-config shows it (FELIX_QUIC_BIND).
func configFileKeys(table []setting) map[string]int {
	keys := map[string]int{}
	for i, s := range table {
		keys[strings.ReplaceAll(s.flag, "-", "_")] = i
		keys[s.env] = i
	}
	return keys
}

// applyConfigFile reads the file FELIX_BROKER_CONFIG names (an unreadable or missing one
// is an error), else DefaultConfigFile when it exists, into cfg, marking SourceFile. Every
// error wraps ErrConfig and names the file, the line and the key: an unknown key (with the
// closest known one), a key given twice (also as quic_bind and FELIX_QUIC_BIND), a bad
// value.
func applyConfigFile(cfg *Config, table []setting, lookup func(string) (string, bool)) error {
	path, explicit := lookup("FELIX_BROKER_CONFIG")
	if !explicit || path == "" {
		path = DefaultConfigFile
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	entries, err := configfile.Read(path)
	if err != nil {
		return fmt.Errorf("%w: FELIX_BROKER_CONFIG=%s: %v", ErrConfig, path, err)
	}
	keys := configFileKeys(table)
	seen := map[int]int{}
	for _, e := range entries {
		i, ok := keys[e.Key]
		if !ok {
			return fmt.Errorf("%w: %s:%d: unknown key %q%s", ErrConfig, path, e.Line, e.Key, closestKey(e.Key, keys))
		}
		if first, dup := seen[i]; dup {
			return fmt.Errorf("%w: %s:%d: %q sets %s again (line %d)", ErrConfig, path, e.Line, e.Key, table[i].env, first)
		}
		seen[i] = e.Line
		if err := table[i].set(cfg, e.Value); err != nil {
			return fmt.Errorf("%w: %s:%d: %s=%q: %v", ErrConfig, path, e.Line, e.Key, e.Value, err)
		}
		cfg.sources[table[i].env] = SourceFile
	}
	return nil
}

// closestKey is "; did you mean X?" for the known key nearest to key, or "".
func closestKey(key string, keys map[string]int) string {
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	if t := configfile.Typos([]string{"FELIX_" + key}, prefixed(names), nil); len(t) == 1 {
		return fmt.Sprintf("; did you mean %q?", strings.TrimPrefix(t[0].Closest, "FELIX_"))
	}
	return ""
}

// prefixed puts "FELIX_" before every name (configfile.Typos looks at FELIX_* names only).
func prefixed(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "FELIX_" + n
	}
	return out
}

// otherFelixVariables are FELIX_* variables other Felix programs read from an environment
// the broker may share (the CLI's, the SDK's, the test hooks'); EnvTypos never reports them.
var otherFelixVariables = []string{
	"FELIX_SERVER", "FELIX_ADMIN_URL", "FELIX_TOKEN", "FELIX_AUTH_TOKEN", "FELIX_TOKEN_FILE", "FELIX_TENANT",
	"FELIX_AUTH_TENANT", "FELIX_NAMESPACE", "FELIX_TLS_FINGERPRINT", "FELIX_TLS_INSECURE", "FELIX_CLIENT_CONFIG",
	"FELIX_CONTROLPLANE_CONFIG", "FELIX_TEST_SEED", "FELIX_SIM_SEEDS",
}

// EnvTypos returns the FELIX_* variables of environ (os.Environ) that the broker does not
// read but that are within a few edits of one it does, each with that closest one;
// felix-broker logs one warning per entry at start (issue 23 item 11).
func EnvTypos(environ []string) []configfile.Typo {
	known := []string{"FELIX_BROKER_CONFIG", clock.EnvOffsetMS, clock.EnvRate, "FELIX_TEST_FENCE_ROUND"}
	for _, s := range settings() {
		known = append(known, s.env)
	}
	return configfile.Typos(environ, known, otherFelixVariables)
}
