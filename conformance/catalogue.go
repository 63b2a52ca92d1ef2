// Package conformance holds Felix's client conformance catalogue (scenarios.json, issue 25)
// and the results document a binding's suite writes against it: Catalogue reads the
// embedded catalogue, Results is the document (scenario id → pass, fail or skip with a
// detail), Verify refuses results in which a required scenario has no passing result.
// The Go SDK's suite is this package's tests (docs/client-conformance.md).
package conformance

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

//go:embed scenarios.json
var catalogueJSON []byte

// Levels of a scenario: a binding conforms when every required scenario passes; an
// optional one (today: those that need a cluster) may be skipped.
const (
	Required = "required"
	Optional = "optional"
)

// Statuses of a scenario's result.
const (
	Pass = "pass"
	Fail = "fail"
	Skip = "skip"
)

// Scenario is one entry of the catalogue: a stable id ("area.name", lowercase, e.g.
// "counter.absent-not-zero"; never renamed or reused), its level (Required or Optional),
// a title, and what a binding's test must show.
type Scenario struct {
	ID    string `json:"id"`
	Level string `json:"level"`
	Title string `json:"title"`
	Shows string `json:"shows"`
}

// Result is one scenario's outcome in a results document: Status Pass, Fail or Skip, and
// a detail (the failure or the reason for a skip; may be empty for a pass).
type Result struct {
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Results is the results document a suite writes (JSON): the client it checked and one
// Result per scenario id.
type Results struct {
	Client    string            `json:"client"`
	Scenarios map[string]Result `json:"scenarios"`
}

// ErrNotConformant is returned by Verify when a required scenario has no passing result,
// a result names an id the catalogue does not have, or a status is not Pass, Fail or Skip.
var ErrNotConformant = errors.New("conformance: not conformant")

var idPattern = regexp.MustCompile(`^[a-z]+\.[a-z0-9]+(-[a-z0-9]+)*$`)

// Catalogue returns the embedded catalogue's scenarios in file order. Errors: a catalogue
// that does not parse, an id that is malformed or repeated, a level other than Required or
// Optional, an empty title or shows.
func Catalogue() ([]Scenario, error) { return parseCatalogue(catalogueJSON) }

func parseCatalogue(data []byte) ([]Scenario, error) {
	var doc struct {
		Scenarios []Scenario `json:"scenarios"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("conformance: catalogue: %w", err)
	}
	seen := map[string]bool{}
	for _, s := range doc.Scenarios {
		switch {
		case !idPattern.MatchString(s.ID):
			return nil, fmt.Errorf("conformance: catalogue: malformed id %q", s.ID)
		case seen[s.ID]:
			return nil, fmt.Errorf("conformance: catalogue: id %q listed twice", s.ID)
		case s.Level != Required && s.Level != Optional:
			return nil, fmt.Errorf("conformance: catalogue: %s: level %q", s.ID, s.Level)
		case s.Title == "" || s.Shows == "":
			return nil, fmt.Errorf("conformance: catalogue: %s: empty title or shows", s.ID)
		}
		seen[s.ID] = true
	}
	if len(doc.Scenarios) == 0 {
		return nil, errors.New("conformance: catalogue: no scenarios")
	}
	return doc.Scenarios, nil
}

// Verify checks res against the catalogue cat: every Required scenario must have a Pass
// result; every result must name a catalogue id and carry a known status. It returns nil,
// or an error matching ErrNotConformant that lists every problem, one per line.
func Verify(cat []Scenario, res Results) error {
	known := map[string]bool{}
	var problems []string
	for _, s := range cat {
		known[s.ID] = true
		r, ok := res.Scenarios[s.ID]
		switch {
		case s.Level != Required:
		case !ok:
			problems = append(problems, fmt.Sprintf("%s (required): no result", s.ID))
		case r.Status != Pass:
			problems = append(problems, fmt.Sprintf("%s (required): %s %s", s.ID, r.Status, r.Detail))
		}
	}
	ids := make([]string, 0, len(res.Scenarios))
	for id := range res.Scenarios {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := res.Scenarios[id]
		if !known[id] {
			problems = append(problems, fmt.Sprintf("%s: not in the catalogue", id))
		}
		if r.Status != Pass && r.Status != Fail && r.Status != Skip {
			problems = append(problems, fmt.Sprintf("%s: status %q", id, r.Status))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w:\n%s", ErrNotConformant, strings.Join(problems, "\n"))
	}
	return nil
}

// ReadResults reads a results document from path. Errors: the file's, or one that is not
// a results document (JSON with a scenarios object).
func ReadResults(path string) (Results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Results{}, err
	}
	var res Results
	if err := json.Unmarshal(data, &res); err != nil {
		return Results{}, fmt.Errorf("conformance: results %s: %w", path, err)
	}
	if res.Scenarios == nil {
		return Results{}, fmt.Errorf("conformance: results %s: no scenarios object", path)
	}
	return res, nil
}

// WriteResults writes res to path as indented JSON (keys sorted, so two runs diff cleanly).
func WriteResults(path string, res Results) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// Report renders res against cat as one line per catalogue scenario, in catalogue order:
// "pass  required  pubsub.byte-exact  detail", "none" for a scenario without a result.
func Report(cat []Scenario, res Results) string {
	var b strings.Builder
	for _, s := range cat {
		r, ok := res.Scenarios[s.ID]
		status := r.Status
		if !ok {
			status = "none"
		}
		fmt.Fprintf(&b, "%-5s %-9s %-36s %s\n", status, s.Level, s.ID, r.Detail)
	}
	return b.String()
}
