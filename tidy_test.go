package felix_test

// The style test: it keeps the pure packages free of clocks, I/O and global
// randomness, and it keeps the list of functions longer than 70 lines from
// growing. See docs/architecture.md ("Pure?" column).

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// purePackages are the directories whose non-test code must stay
// deterministic: no clocks, no I/O, no global randomness.
var purePackages = []string{"proto", "core/cache", "core/groups"}

// forbiddenImports may not be imported by a pure package.
var forbiddenImports = map[string]string{
	"os":                    "I/O",
	"os/exec":               "I/O",
	"net":                   "I/O",
	"net/http":              "I/O",
	"io/ioutil":             "I/O",
	"syscall":               "I/O",
	"golang.org/x/sys/unix": "I/O",
	"math/rand":             "global randomness",
	"math/rand/v2":          "global randomness",
	"crypto/rand":           "global randomness",
	"log":                   "I/O (logging)",
	"log/slog":              "I/O (logging)",
}

// forbiddenTimeCalls are the clock-reading or sleeping functions of package
// time; types such as time.Duration remain allowed.
var forbiddenTimeCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true,
}

// maxFuncLines is the length above which a function must be listed in
// longFunctionsFile; the list may shrink but must not grow.
const maxFuncLines = 70

// longFunctionsFile lists "path:FuncName" for every function over
// maxFuncLines lines today. Regenerate with FELIX_TIDY_UPDATE=1 only when
// removing entries.
const longFunctionsFile = "testdata/long_functions.txt"

func goFiles(t *testing.T, root string, withTests bool) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		if !withTests && strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files = append(files, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// purityViolations lists, for the non-test Go files of dir, every forbidden
// import and every clock call, as "file:line: reason" strings.
func purityViolations(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		path := filepath.Join(dir, name)
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return nil, err
		}
		timeName := ""
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if why, bad := forbiddenImports[p]; bad {
				out = append(out, fmt.Sprintf("%s: imports %q (%s)", fset.Position(imp.Pos()), p, why))
			}
			if p == "time" {
				timeName = "time"
				if imp.Name != nil {
					timeName = imp.Name.Name
				}
			}
		}
		if timeName == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == timeName && forbiddenTimeCalls[sel.Sel.Name] {
				out = append(out, fmt.Sprintf("%s: calls time.%s (a clock); pass time in as an argument",
					fset.Position(sel.Pos()), sel.Sel.Name))
			}
			return true
		})
	}
	return out, nil
}

func TestPurePackagesHaveNoClocksIOOrRandomness(t *testing.T) {
	for _, dir := range purePackages {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			continue
		}
		bad, err := purityViolations(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bad {
			t.Errorf("%s is a pure package: %s", dir, b)
		}
	}
}

// TestPurityCheckFindsViolations keeps the checker honest: the impure sample
// under testdata must be caught on each count.
func TestPurityCheckFindsViolations(t *testing.T) {
	bad, err := purityViolations("testdata/tidy/impure")
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(bad, "\n")
	for _, want := range []string{`imports "os"`, `imports "math/rand"`, "calls time.Now", "calls time.Sleep"} {
		if !strings.Contains(joined, want) {
			t.Errorf("purity check missed %s; found:\n%s", want, joined)
		}
	}
}

func longFunctions(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	var long []string
	for _, path := range goFiles(t, ".", false) {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if lines <= maxFuncLines {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) > 0 {
				name = recvName(fn.Recv.List[0].Type) + "." + name
			}
			long = append(long, filepath.ToSlash(path)+":"+name)
		}
	}
	sort.Strings(long)
	return long
}

func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.IndexListExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}

func TestNoNewLongFunctions(t *testing.T) {
	got := longFunctions(t)
	if os.Getenv("FELIX_TIDY_UPDATE") == "1" {
		if err := os.WriteFile(longFunctionsFile, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(longFunctionsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	allowed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			allowed[line] = true
		}
	}
	for _, fn := range got {
		if !allowed[fn] {
			t.Errorf("%s is longer than %d lines: split it (the list in %s may only shrink)", fn, maxFuncLines, longFunctionsFile)
		}
	}
}
