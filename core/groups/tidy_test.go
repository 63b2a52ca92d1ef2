package groups

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTidy keeps the package pure (doc.go): no goroutines, no clock, no I/O, no global
// randomness, no locks, in any non-test file; and no new function over 70 lines.
func TestTidy(t *testing.T) {
	banned := map[string]string{
		"os": "I/O", "io": "I/O", "io/fs": "I/O", "net": "I/O", "syscall": "I/O",
		"math/rand": "randomness", "math/rand/v2": "randomness", "crypto/rand": "randomness",
		"sync": "locks", "sync/atomic": "locks", "time": "clocks", "unsafe": "unsafe",
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if why, bad := banned[path]; bad {
				t.Errorf("%s imports %q (%s): the package must stay pure", name, path, why)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: go statement: the package must not start goroutines", fset.Position(n.Pos()))
			case *ast.FuncDecl:
				if lines := fset.Position(n.End()).Line - fset.Position(n.Pos()).Line; lines > 70 {
					t.Errorf("%s: %s is %d lines; split it (limit 70)", fset.Position(n.Pos()), n.Name.Name, lines)
				}
			}
			return true
		})
	}
}
