package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// maxFuncLines bounds a function outside tests and generated code: one a reader
// can hold in view. A longer one is split where it does several things.
const maxFuncLines = 120

// TestNoLongFunctions fails on any function or method of a non-test,
// non-generated Go file whose declaration spans more than maxFuncLines lines.
func TestNoLongFunctions(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files := 0
	walkGo(t, false, func(path string) error {
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		files++
		rel, _ := filepath.Rel(repoRoot, path)
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
				t.Errorf("%s: %s is %d lines (at most %d): split it where it does several things", rel, fd.Name.Name, n, maxFuncLines)
			}
		}
		return nil
	})
	if files < 100 {
		t.Fatalf("read %d Go files: the walk missed the tree", files)
	}
}
