package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"paysvc/actors/values/every"
)

// The one list of periodic jobs is every's catalogue; docs/operations.md's table
// ("Periodic jobs") documents each of them and no other.
func TestDocsListEveryPeriodicJob(t *testing.T) {
	t.Parallel()
	doc := readRepoFile(t, "docs/operations.md")
	_, section, ok := strings.Cut(doc, "\n## Periodic jobs\n")
	if !ok {
		t.Fatal(`docs/operations.md has no "## Periodic jobs" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+\\.[a-z_]+)` \\|").FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(documented)
	want := every.Names()
	for _, n := range want {
		if !slices.Contains(documented, n) {
			t.Errorf(`docs/operations.md ("Periodic jobs") has no row for the job %s: add "| `+"`%s`"+` | <interval> | <role> | <what a run does> |"`, n, n)
		}
	}
	for _, n := range documented {
		if !slices.Contains(want, n) {
			t.Errorf(`docs/operations.md ("Periodic jobs") documents %s, which is not in actors/values/every/catalogue.go`, n)
		}
	}
	if len(slices.Compact(slices.Clone(documented))) != len(documented) {
		t.Errorf("docs/operations.md lists a job twice: %v", documented)
	}
}

// Every job of the catalogue is run by the product: its constant is named outside
// the every package by a file that is not a test, so the catalogue (and the docs
// checked against it) lists nothing that no longer runs.
func TestPeriodicJobsCatalogueIsRun(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(repoRoot, "actors/values/every/catalogue.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{} // identifier -> job name
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
					consts[id.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
	}
	if len(consts) != len(every.Names()) {
		t.Fatalf("catalogue.go declares %d job constants, Names() lists %d", len(consts), len(every.Names()))
	}
	used := map[string]bool{}
	walkGo(t, false, func(path string) error {
		if rel, _ := filepath.Rel(repoRoot, path); strings.HasPrefix(rel, "actors/values/every/") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for id := range consts {
			if regexp.MustCompile(`\bevery\.` + id + `\b`).Match(b) {
				used[id] = true
			}
		}
		return nil
	})
	for id, name := range consts {
		if !used[id] {
			t.Errorf("the job %s (every.%s) is in the catalogue but no product code runs it: remove it from catalogue.go and docs/operations.md", name, id)
		}
	}
}
