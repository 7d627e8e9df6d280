package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// root is the repository's top directory.
const root = "../.."

var testName = regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9_]*`)

// walk calls visit for every file under root whose name ends in ext,
// skipping version control and test data.
func walk(t *testing.T, ext string, visit func(path string, data []byte)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ext) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err == nil {
			visit(path, data)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCommentsNameTestsThatExist: a test named in a Go comment or a doc
// is a function of some package's tests.
func TestCommentsNameTestsThatExist(t *testing.T) {
	defined := map[string]bool{}
	named := map[string][]string{} // test → where it is named
	fset := token.NewFileSet()
	walk(t, ".go", func(path string, data []byte) {
		f, err := parser.ParseFile(fset, path, data, parser.ParseComments)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
				defined[fn.Name.Name] = true
			}
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				for _, name := range testName.FindAllString(c.Text, -1) {
					named[name] = append(named[name], fset.Position(c.Pos()).String())
				}
			}
		}
	})
	walk(t, ".md", func(path string, data []byte) {
		for i, line := range strings.Split(string(data), "\n") {
			for _, name := range testName.FindAllString(line, -1) {
				named[name] = append(named[name], path+":"+strconv.Itoa(i+1))
			}
		}
	})
	if len(defined) < 100 || len(named) < 100 {
		t.Fatalf("found %d test functions and %d named in prose: not the repository", len(defined), len(named))
	}
	report(t, named, func(name string) bool { return defined[name] }, "names a test that does not exist")
}

// pathInProse is a path in backquotes in a doc (`internal/scheduler/loop.go`,
// `./fencing`, `deploy/kubernetes/`).
var pathInProse = regexp.MustCompile("`(?:\\./)?([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+)/?`")

// TestDocsNameFilesThatExist: a path a doc names in backquotes that starts
// at one of the repository's top-level entries is there.
func TestDocsNameFilesThatExist(t *testing.T) {
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	top := map[string]bool{}
	for _, e := range entries {
		top[e.Name()] = true
	}
	named := map[string][]string{}
	walk(t, ".md", func(path string, data []byte) {
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range pathInProse.FindAllStringSubmatch(line, -1) {
				if top[strings.SplitN(m[1], "/", 2)[0]] {
					named[m[1]] = append(named[m[1]], path+":"+strconv.Itoa(i+1))
				}
			}
		}
	})
	if len(named) < 10 {
		t.Fatalf("found %d paths named in the docs: not the repository", len(named))
	}
	report(t, named, func(p string) bool {
		_, err := os.Stat(filepath.Join(root, p))
		return err == nil
	}, "names a path that does not exist")
}

// report fails t once for each name that exists refuses, at each place it
// is named.
func report(t *testing.T, named map[string][]string, exists func(string) bool, what string) {
	t.Helper()
	names := make([]string, 0, len(named))
	for n := range named {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !exists(n) {
			t.Errorf("%s %s: %s", strings.Join(named[n], ", "), what, n)
		}
	}
}
