// Package statedoc reads the tables of docs/state-machines.md for the aggregates'
// tests, which hold each documented transition table against the code: the
// document and the tests read it one way, so a table cannot drift from either.
// Imported by tests only.
package statedoc

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// path is docs/state-machines.md, found from this file's place in the repository
// (actors/aggregates/statedoc), so every caller reads the same file whatever its
// own directory.
func path(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("statedoc: cannot locate the repository")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "docs", "state-machines.md")
}

// Table reads the rows of the table with the given header line inside a section
// (a "## " heading) of docs/state-machines.md, cells trimmed.
func Table(t testing.TB, section, header string) [][]string {
	t.Helper()
	f, err := os.Open(path(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	in, table, seen := false, false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == section
			table = false
		case in && line == header:
			table, seen = true, true
		case table && strings.HasPrefix(line, "|"):
			if strings.HasPrefix(line, "|--") || strings.HasPrefix(line, "| --") {
				continue
			}
			var cells []string
			for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
				cells = append(cells, strings.TrimSpace(c))
			}
			rows = append(rows, cells)
		default:
			table = false
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !seen {
		t.Fatalf("docs/state-machines.md: no table %q under %q", header, section)
	}
	return rows
}
