package felix_test

// The style test: it keeps the pure packages free of clocks, I/O and global
// randomness (docs/architecture.md, "Pure?" column), and it keeps functions
// within 70 lines and .go files within 800 lines, tests included, but for the
// ones listed in testdata/long_functions.txt and testdata/long_files.txt:
// lists that may only shrink.

import (
	"bufio"
	"bytes"
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
var purePackages = []string{"proto", "core/cache", "core/groups", "cluster/sim", "cluster/meta", "cluster/replica", "cluster/forward", "cluster/placement"}

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

// The size rules: a function may be at most maxFuncLines lines and a .go file
// at most maxFileLines lines, tests included in both. The ones over a limit
// today are listed in an allow-list under testdata; each list may only shrink.
// The test fails on an offender that is not listed (split it) and on a listed
// entry that no longer offends or no longer exists (delete its line, so that
// it cannot grow back). FELIX_TIDY_UPDATE=1 deletes those stale lines for you;
// it never adds one.

// maxFuncLines is the length above which a function must be listed in
// longFunctionsFile.
const maxFuncLines = 70

// longFunctionsFile lists "path:Func" or "path:Recv.Method" for every
// function (tests included) over maxFuncLines lines today.
const longFunctionsFile = "testdata/long_functions.txt"

// maxFileLines is the length above which a .go file must be listed in
// longFilesFile.
const maxFileLines = 800

// longFilesFile lists the path of every .go file (tests included) over
// maxFileLines lines today.
const longFilesFile = "testdata/long_files.txt"

// sizeRule is one of the two size rules, with the words of its messages.
type sizeRule struct {
	what  string // "function" or "file"
	limit int
	list  string // the allow-list, relative to the tree's root
	test  string // the test that runs the rule, for the FELIX_TIDY_UPDATE hint
	fix   string // what to do with a new offender
}

var (
	funcRule = sizeRule{what: "function", limit: maxFuncLines, list: longFunctionsFile, test: "TestNoNewLongFunctions",
		fix: "split it into smaller functions (a helper per step; for a test, helpers or table-driven cases)"}
	fileRule = sizeRule{what: "file", limit: maxFileLines, list: longFilesFile, test: "TestNoNewLongFiles",
		fix: fmt.Sprintf("split it along natural lines into files of at most %d lines, each with a header comment saying "+
			"what it holds (moving tests: say in the commit message which tests moved from where to where)", maxFileLines)}
)

// goFiles returns every .go file under root, tests included, as slash paths
// relative to root. It skips hidden, testdata, vendor and bin directories.
// bench/peers is walked like the rest: it is our own peer program (a module
// of its own), not vendored code.
func goFiles(root string) ([]string, error) {
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
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	return files, err
}

// fileSizes returns the line count of every .go file under root.
func fileSizes(root string) (map[string]int, error) {
	files, err := goFiles(root)
	if err != nil {
		return nil, err
	}
	sizes := make(map[string]int, len(files))
	for _, path := range files {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return nil, err
		}
		n := bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			n++
		}
		sizes[path] = n
	}
	return sizes, nil
}

// funcSizes returns the line count of every function with a body under root,
// keyed "path:Func" or "path:Recv.Method".
func funcSizes(root string) (map[string]int, error) {
	files, err := goFiles(root)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	sizes := map[string]int{}
	for _, path := range files {
		f, err := parser.ParseFile(fset, filepath.Join(root, path), nil, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) > 0 {
				name = recvName(fn.Recv.List[0].Type) + "." + name
			}
			key := path + ":" + name
			sizes[key] = max(sizes[key], fset.Position(fn.End()).Line-fset.Position(fn.Pos()).Line+1)
		}
	}
	return sizes, nil
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

// readList reads an allow-list: its leading comment lines (kept when the list
// is rewritten) and its entries. Blank lines and lines starting with # are not
// entries.
func readList(path string) (header, entries []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "#"):
			if len(entries) == 0 {
				header = append(header, line)
			}
		case line != "":
			entries = append(entries, line)
		}
	}
	return header, entries, sc.Err()
}

// run checks the sizes of the tree at root against the rule's allow-list and
// returns one message per offender that is not listed and per listed entry
// that no longer offends. With update, it rewrites the list without those
// stale entries (and reports them no more); it never adds an entry.
func (r sizeRule) run(root string, sizes map[string]int, update bool) ([]string, error) {
	listPath := filepath.Join(root, r.list)
	header, entries, err := readList(listPath)
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	var problems, kept []string
	for _, e := range entries {
		listed[e] = true
		n, exists := sizes[e]
		switch {
		case exists && n > r.limit:
			kept = append(kept, e)
		case update:
		case !exists:
			problems = append(problems, fmt.Sprintf("%s is listed in %s but no such %s exists any more: "+
				"delete its line from %s (or run FELIX_TIDY_UPDATE=1 go test . -run %s); if it only moved or was renamed, "+
				"unchanged, change its line to the new name instead; the list may only shrink",
				e, r.list, r.what, r.list, r.test))
		default:
			problems = append(problems, fmt.Sprintf("%s is listed in %s but is %d lines now, within the %d-line limit: "+
				"delete its line from %s so that it stays within the limit (or run FELIX_TIDY_UPDATE=1 go test . -run %s)",
				e, r.list, n, r.limit, r.list, r.test))
		}
	}
	var offenders []string
	for k, n := range sizes {
		if n > r.limit && !listed[k] {
			offenders = append(offenders, k)
		}
	}
	sort.Strings(offenders)
	for _, k := range offenders {
		problems = append(problems, fmt.Sprintf("%s is %d lines, over the %d-line limit for a %s: %s. "+
			"%s lists the %ss allowed over the limit today and may only shrink: do not add to it",
			k, sizes[k], r.limit, r.what, r.fix, r.list, r.what))
	}
	if update && len(kept) < len(entries) {
		sort.Strings(kept)
		text := strings.Join(append(header, kept...), "\n") + "\n"
		if err := os.WriteFile(listPath, []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	return problems, nil
}

// runSizeRule runs r on the repository (the working directory of go test .).
func runSizeRule(t *testing.T, r sizeRule, sizes func(string) (map[string]int, error)) {
	t.Helper()
	got, err := sizes(".")
	if err != nil {
		t.Fatal(err)
	}
	problems, err := r.run(".", got, os.Getenv("FELIX_TIDY_UPDATE") == "1")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestNoNewLongFunctions: no function (tests included) over maxFuncLines lines
// but those in longFunctionsFile, and none listed there that is not.
func TestNoNewLongFunctions(t *testing.T) { runSizeRule(t, funcRule, funcSizes) }

// TestNoNewLongFiles: no .go file (tests included) over maxFileLines lines but
// those in longFilesFile, and none listed there that is not.
func TestNoNewLongFiles(t *testing.T) { runSizeRule(t, fileRule, fileSizes) }

// TestSizeRulesFindViolations keeps the two size rules honest on a synthetic
// tree in a temp dir (sizeFixture): each catches a new offender (tests
// included), passes one exactly at the limit and one listed, skips testdata,
// flags listed entries that shrank or vanished, and FELIX_TIDY_UPDATE's
// rewrite only removes lines.
func TestSizeRulesFindViolations(t *testing.T) {
	root := sizeFixture(t)
	checkSizeRule(t, root, funcRule, funcSizes,
		[]string{"a/long.go:Long", "a/long.go:T.Big", "a/long_test.go:TestLong"},
		[]string{"a/long.go:Shrunk", "a/gone.go:Gone"}, "# header kept\na/long.go:Listed\n")
	checkSizeRule(t, root, fileRule, fileSizes,
		[]string{"a/big_test.go"}, []string{"a/shrunk.go", "a/missing.go"}, "# header kept\na/listed.go\n")
}

// sizeFixture writes, under a temp dir, functions and files over, at and under
// the limits, and the two allow-lists; it returns the root.
func sizeFixture(t *testing.T) string {
	root := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		path = filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fn := func(decl string, lines int) string { // a function of exactly lines lines
		return decl + " {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	padded := func(lines int, body string) string { // a file of exactly lines lines
		return body + strings.Repeat("//\n", lines-strings.Count(body, "\n"))
	}
	write("a/long.go", "package a\n\ntype T struct{}\n\n"+fn("func Long()", maxFuncLines+1)+fn("func AtLimit()", maxFuncLines)+
		fn("func (*T) Big()", maxFuncLines+1)+fn("func Listed()", maxFuncLines+1)+fn("func Shrunk()", maxFuncLines))
	write("a/long_test.go", "package a\n\nimport \"testing\"\n\n"+fn("func TestLong(t *testing.T)", maxFuncLines+1))
	write("a/big_test.go", padded(maxFileLines+1, "package a\n"))
	write("a/edge.go", padded(maxFileLines, "package a\n"))
	write("a/listed.go", padded(maxFileLines+1, "package a\n"))
	write("a/shrunk.go", "package a\n")
	write("a/testdata/huge.go", padded(maxFileLines+100, "package huge\n\n"+fn("func Huge()", maxFuncLines+100)))
	write(funcRule.list, "# header kept\na/long.go:Listed\na/long.go:Shrunk\na/gone.go:Gone\n")
	write(fileRule.list, "# header kept\na/listed.go\na/shrunk.go\na/missing.go\n")
	return root
}

// checkSizeRule runs r on the tree at root: it must report exactly the new
// offenders and the stale entries, each with what to do; then, in update mode,
// only the offenders, leaving the list as kept.
func checkSizeRule(t *testing.T, root string, r sizeRule, sizesOf func(string) (map[string]int, error),
	offenders, stale []string, kept string) {
	t.Helper()
	sizes, err := sizesOf(root)
	if err != nil {
		t.Fatal(err)
	}
	problems, err := r.run(root, sizes, false)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(problems, "\n")
	if len(problems) != len(offenders)+len(stale) {
		t.Errorf("%s rule: %d problems, want %d:\n%s", r.what, len(problems), len(offenders)+len(stale), joined)
	}
	for _, k := range offenders {
		if !strings.Contains(joined, k+" is ") || !strings.Contains(joined, "split it") || !strings.Contains(joined, "do not add to it") {
			t.Errorf("%s rule missed the new offender %s, or does not say what to do:\n%s", r.what, k, joined)
		}
	}
	for _, k := range stale {
		why := " but is " // shrank
		if _, exists := sizes[k]; !exists {
			why = " but no such " + r.what + " exists"
		}
		if !strings.Contains(joined, k+" is listed in "+r.list+why) || !strings.Contains(joined, "delete its line") {
			t.Errorf("%s rule missed the stale entry %s, or does not say why and what to do:\n%s", r.what, k, joined)
		}
	}
	for _, ok := range []string{"AtLimit", "a/edge.go", "huge", ":Listed", "a/listed.go "} {
		if strings.Contains(joined, ok) {
			t.Errorf("%s rule flagged %s (at the limit, listed, or under testdata):\n%s", r.what, ok, joined)
		}
	}
	if problems, err = r.run(root, sizes, true); err != nil {
		t.Fatal(err)
	}
	if len(problems) != len(offenders) {
		t.Errorf("%s rule after update: %d problems, want the %d new offenders only:\n%s",
			r.what, len(problems), len(offenders), strings.Join(problems, "\n"))
	}
	if b, err := os.ReadFile(filepath.Join(root, r.list)); err != nil || string(b) != kept {
		t.Errorf("%s list after update = %q, %v; want %q (stale lines gone, nothing added)", r.what, b, err, kept)
	}
}
