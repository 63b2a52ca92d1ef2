package e2e

import (
	"testing"

	"felix/testbed/corpus"
)

// loadCorpus is corpus.Load over corpusRoots, failing the test when nothing is left.
func loadCorpus(t *testing.T, roots []string, limit int, maxPayload int64) *corpus.Corpus {
	t.Helper()
	c, err := corpus.Load(roots, limit, maxPayload)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// corpusRoots are $(go env GOROOT)/src and /usr/share/doc (the latter when present).
func corpusRoots(t *testing.T) []string {
	t.Helper()
	roots, err := corpus.Roots()
	if err != nil {
		t.Fatal(err)
	}
	return roots
}
