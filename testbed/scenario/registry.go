package scenario

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Scenario is one named fault scenario of the registry.
type Scenario struct {
	// Name identifies the scenario on the command line (--scenario NAME): lower-case
	// letters, digits and '-', starting with a letter.
	Name string
	// Description is one line (no newline) saying what the scenario does, for `run --list`.
	Description string
	// Defaults are the sizes used for the knobs a run leaves unset (Sizes has the rules).
	Defaults Sizes
	// Run runs the scenario once in env (sizes already defaulted) and returns the table
	// of what it checked. ctx carries the run's deadline (Sizes.Duration). A non-nil
	// error means the run could not finish (a broker that would not start, a stuck
	// client): the result holds what was checked until then and counts as failed.
	Run func(ctx context.Context, env *Env) (Result, error)
}

// Errors of Register.
var (
	// ErrDuplicate: a scenario of that name is already registered.
	ErrDuplicate = errors.New("scenario: name already registered")
	// ErrInvalid: the scenario has a bad name, a multi-line or empty description, or no Run.
	ErrInvalid = errors.New("scenario: invalid scenario")
)

var (
	registryMu sync.Mutex
	registry   = map[string]Scenario{}
	nameRE     = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
)

// Register adds s to the registry. Errors: ErrInvalid (wrapped with the reason),
// ErrDuplicate. Safe for concurrent use; scenarios normally register from init
// through MustRegister.
func Register(s Scenario) error {
	switch {
	case !nameRE.MatchString(s.Name):
		return fmt.Errorf("%w: name %q (want [a-z][a-z0-9-]*)", ErrInvalid, s.Name)
	case s.Description == "" || strings.ContainsAny(s.Description, "\r\n"):
		return fmt.Errorf("%w: %s: the description must be one non-empty line", ErrInvalid, s.Name)
	case s.Run == nil:
		return fmt.Errorf("%w: %s: no Run", ErrInvalid, s.Name)
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, ok := registry[s.Name]; ok {
		return fmt.Errorf("%w: %s", ErrDuplicate, s.Name)
	}
	registry[s.Name] = s
	return nil
}

// MustRegister is Register that panics on an error: for init functions, where a
// bad or duplicate scenario is a programming error.
func MustRegister(s Scenario) {
	if err := Register(s); err != nil {
		panic(err)
	}
}

// Lookup returns the scenario registered under name, and whether there is one.
func Lookup(name string) (Scenario, bool) {
	registryMu.Lock()
	defer registryMu.Unlock()
	s, ok := registry[name]
	return s, ok
}

// All returns every registered scenario, sorted by name.
func All() []Scenario {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]Scenario, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns the registered names, sorted.
func Names() []string {
	all := All()
	names := make([]string, len(all))
	for i, s := range all {
		names[i] = s.Name
	}
	return names
}
