package checker

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSelfTest(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	passed, failed := RunSelfTest(&out, dir)
	t.Log("\n" + out.String())
	if failed != 0 || passed != len(SelfTestCases()) {
		t.Fatalf("selftest: %d passed, %d failed", passed, failed)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; last != strings.TrimSpace(lines[len(lines)-1]) || last != "16 passed, 0 failed" {
		t.Fatalf("final line %q", last)
	}
	html, err := filepath.Glob(filepath.Join(dir, "*.html"))
	if err != nil || len(html) == 0 {
		t.Fatalf("no visualization written: %v %v", html, err)
	}
	if b, _ := os.ReadFile(html[0]); !bytes.Contains(b, []byte("<html")) {
		t.Fatalf("%s is not HTML", html[0])
	}
}
