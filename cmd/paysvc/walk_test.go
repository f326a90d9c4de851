package main

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// walkRepo calls visit with the path of every file of the repository and fails
// the test on an error from the walk or from visit. It skips node_modules, hidden
// folders (.git, .data, tool caches) and the folders named in skip: none holds
// the project's own code, and the checks that walk the tree judge only that.
func walkRepo(t *testing.T, visit func(path string) error, skip ...string) {
	t.Helper()
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return visit(path)
		}
		if path != repoRoot && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") || slices.Contains(skip, d.Name())) {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// walkGo is walkRepo over the Go files only: the test files when tests is true,
// the product's files when it is false.
func walkGo(t *testing.T, tests bool, visit func(path string) error, skip ...string) {
	t.Helper()
	walkRepo(t, func(path string) error {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") != tests {
			return nil
		}
		return visit(path)
	}, skip...)
}
