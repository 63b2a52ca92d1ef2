package main

import (
	"fmt"
	"io"
	"strings"

	"felix/internal/configfile"
	"felix/internal/version"
)

// printVersion answers --version (issue 23 item 10): the release and commit line on w;
// it reports whether args asked for it.
func printVersion(args []string, w io.Writer) bool {
	if len(args) != 1 || (args[0] != "--version" && args[0] != "-version") {
		return false
	}
	fmt.Fprintln(w, version.Get().Line("felix-controlplane"))
	return true
}

// loadConfigFile is loadConfig with the YAML file FELIX_CONTROLPLANE_CONFIG names
// underneath the environment (issue 23 item 11; spec/config.md §5): a flat mapping whose
// keys are the variables as --print-config shows them (FELIX_CONTROLPLANE_BIND) or their
// lowercase names without FELIX_ (controlplane_bind); env wins over the file, and
// --print-config shows "file" for what the file set. An unreadable or malformed file, or an
// unknown key, is an error naming the file and line. A set FELIX_* variable of environ
// (os.Environ) the control plane does not read but that is a few edits from one it does
// is one warning on warn naming the closest.
func loadConfigFile(lookup func(string) (string, bool), environ []string, warn io.Writer) (*config, error) {
	known := []string{"FELIX_CONTROLPLANE_CONFIG"}
	keys := map[string]string{}
	for _, s := range settings {
		known = append(known, s.env)
		keys[s.env] = s.env
		keys[strings.ToLower(strings.TrimPrefix(s.env, "FELIX_"))] = s.env
	}
	for _, t := range configfile.Typos(environ, known, []string{"FELIX_SERVER", "FELIX_ADMIN_URL", "FELIX_TOKEN", "FELIX_AUTH_TOKEN"}) {
		fmt.Fprintf(warn, "felix-controlplane: warning: unknown variable %s is not read by felix-controlplane; did you mean %s?\n", t.Name, t.Closest)
	}
	fromFile := map[string]string{}
	if path, ok := lookup("FELIX_CONTROLPLANE_CONFIG"); ok && path != "" {
		entries, err := configfile.Read(path)
		if err != nil {
			return nil, fmt.Errorf("FELIX_CONTROLPLANE_CONFIG=%s: %w", path, err)
		}
		for _, e := range entries {
			env, ok := keys[e.Key]
			if !ok {
				return nil, fmt.Errorf("%s:%d: unknown key %q", path, e.Line, e.Key)
			}
			if _, dup := fromFile[env]; dup {
				return nil, fmt.Errorf("%s:%d: %q sets %s again", path, e.Line, e.Key, env)
			}
			fromFile[env] = e.Value
		}
	}
	cfg, err := loadConfig(func(k string) (string, bool) {
		if v, ok := lookup(k); ok {
			return v, true
		}
		v, ok := fromFile[k]
		return v, ok
	})
	if err != nil {
		return nil, err
	}
	for env := range fromFile {
		if _, ok := lookup(env); !ok {
			cfg.sources[env] = "file"
		}
	}
	return cfg, nil
}
