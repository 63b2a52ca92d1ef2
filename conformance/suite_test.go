package conformance

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// env is what the scenarios share: one single-node broker started by TestConformance. A
// scenario that stops, kills or configures its broker starts its own.
type env struct {
	b *broker
}

// shared returns the suite's common broker as seen from scenario t: its failures and
// cleanups (clients dialled, for one) are t's, the process lives until TestConformance ends.
func (e *env) shared(t *testing.T) *broker {
	b := *e.b
	b.t = t
	return &b
}

// scenarios maps each catalogue id to its test; a catalogue id without one is recorded
// as failed ("no test"), an id here not in the catalogue fails TestCatalogueCovered.
var scenarios = map[string]func(t *testing.T, e *env){}

// register adds a scenario's test under its catalogue id (called from init functions).
func register(id string, fn func(t *testing.T, e *env)) {
	if _, dup := scenarios[id]; dup {
		panic("conformance: scenario " + id + " registered twice")
	}
	scenarios[id] = fn
}

// TestConformance runs every catalogue scenario as the subtest named by its id and
// records pass, fail or skip for the results document.
func TestConformance(t *testing.T) {
	cat, err := Catalogue()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{b: startBroker(t)} // no broker: no scenario runs, and verify finds no results
	for _, s := range cat {
		fn := scenarios[s.ID]
		if fn == nil {
			recorded.set(s.ID, Result{Status: Fail, Detail: "no test for this scenario"})
			t.Errorf("%s: no test", s.ID)
			continue
		}
		ran, status := false, Pass // a subtest -run filtered out reports ok without running: no result then
		ok := t.Run(s.ID, func(t *testing.T) {
			ran = true
			defer func() {
				switch {
				case t.Skipped():
					status = Skip
				case t.Failed():
					status = Fail
				}
			}()
			fn(t, e)
		})
		switch {
		case !ran:
		case status == Skip:
			recorded.set(s.ID, Result{Status: Skip, Detail: "skipped: see the test log"})
		case status == Fail || !ok:
			recorded.set(s.ID, Result{Status: Fail, Detail: "see go test -run 'TestConformance/" + s.ID + "$' ./conformance"})
		default:
			recorded.set(s.ID, Result{Status: Pass, Detail: s.Title})
		}
	}
}

// TestCatalogueCovered: the catalogue parses, covers the scenarios by id, and
// every registered test names a catalogue id.
func TestCatalogueCovered(t *testing.T) {
	cat, err := Catalogue()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, s := range cat {
		ids[s.ID] = true
	}
	for id := range scenarios {
		if !ids[id] {
			t.Errorf("test registered for %s, which the catalogue does not list", id)
		}
	}
	for _, id := range []string{"pubsub.byte-exact", "counter.absent-not-zero", "cache.miss-absent", "errors.typed", "lifecycle.close-twice"} {
		if !ids[id] {
			t.Errorf("catalogue lost %s (ids are stable)", id)
		}
	}
	for _, bad := range []string{`{"scenarios":[]}`, `{"scenarios":[{"id":"Bad Id","level":"required","title":"t","shows":"s"}]}`,
		`{"scenarios":[{"id":"a.b","level":"maybe","title":"t","shows":"s"}]}`,
		`{"scenarios":[{"id":"a.b","level":"required","title":"t","shows":"s"},{"id":"a.b","level":"optional","title":"t","shows":"s"}]}`} {
		if _, err := parseCatalogue([]byte(bad)); err == nil {
			t.Errorf("catalogue %s accepted", bad)
		}
	}
}

// TestVerifyTeeth: Verify (and the -verify mode) accepts a document in which every
// required scenario passes and refuses doctored ones: a required scenario failed, skipped
// or missing, an unknown id, an unknown status.
func TestVerifyTeeth(t *testing.T) {
	cat, err := Catalogue()
	if err != nil {
		t.Fatal(err)
	}
	good := func() Results {
		r := Results{Client: "test", Scenarios: map[string]Result{}}
		for _, s := range cat {
			if s.Level == Required {
				r.Scenarios[s.ID] = Result{Status: Pass}
			} else {
				r.Scenarios[s.ID] = Result{Status: Skip, Detail: "needs a cluster"}
			}
		}
		return r
	}
	if err := Verify(cat, good()); err != nil {
		t.Fatalf("all required passing: %v", err)
	}
	doctor := map[string]func(r Results){
		"failed":         func(r Results) { r.Scenarios["counter.absent-not-zero"] = Result{Status: Fail, Detail: "printed 0"} },
		"skipped":        func(r Results) { r.Scenarios["pubsub.byte-exact"] = Result{Status: Skip} },
		"missing":        func(r Results) { delete(r.Scenarios, "cache.miss-absent") },
		"unknown id":     func(r Results) { r.Scenarios["pubsub.made-up"] = Result{Status: Pass} },
		"unknown status": func(r Results) { r.Scenarios["errors.typed"] = Result{Status: "passed"} },
	}
	dir := t.TempDir()
	for name, edit := range doctor {
		r := good()
		edit(r)
		if err := Verify(cat, r); !errors.Is(err, ErrNotConformant) {
			t.Errorf("%s: Verify = %v, want ErrNotConformant", name, err)
		}
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		if err := WriteResults(path, r); err != nil {
			t.Fatal(err)
		}
		if code := verifyFile(path); code != 1 {
			t.Errorf("%s: -verify exit %d, want 1", name, code)
		}
	}
	path := filepath.Join(dir, "good.json")
	if err := WriteResults(path, good()); err != nil {
		t.Fatal(err)
	}
	if code := verifyFile(path); code != 0 {
		t.Errorf("good document: -verify exit %d", code)
	}
	os.WriteFile(filepath.Join(dir, "garbage.json"), []byte("{"), 0o644)
	if code := verifyFile(filepath.Join(dir, "garbage.json")); code != 1 {
		t.Errorf("unparsable document: -verify exit %d", code)
	}
	if code := verifyFile(filepath.Join(dir, "absent.json")); code != 1 {
		t.Errorf("missing document: -verify exit %d", code)
	}
	if !strings.Contains(Report(cat, good()), "pass  required  pubsub.byte-exact") {
		t.Errorf("report:\n%s", Report(cat, good()))
	}
}
