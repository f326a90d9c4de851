package api

import (
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// TestSecurityDocListsEveryRoute keeps docs/security.md's route table ("Permissions of
// restricted keys") true: every route the router serves is in it, and a route that a
// restricted key may call with a permission names that permission in its row. A reader
// deciding what a key can reach reads that table, not routes().
func TestSecurityDocListsEveryRoute(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := docRouteRows(string(raw))
	if len(rows) < 20 {
		t.Fatalf("docs/security.md: found only %d routes in tables whose first column is \"route\": the parser does not see the table", len(rows))
	}
	s := New(Config{}, Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, r := range s.echo.Routes() {
		if r.Method == echo.RouteNotFound {
			continue // "any unknown path (404)"
		}
		key := r.Method + " " + r.Path
		a := s.declared[key]
		row, ok := rows[key]
		if !ok {
			t.Errorf("docs/security.md: route `%s` is served (api/server.go routes()) but is in no row of the route table under "+
				"\"Permissions of restricted keys\": add `%s` to the row of its callers (%s)", key, key, kindNames[a.kind])
			continue
		}
		if a.perm != "" && !strings.Contains(row, "`"+a.perm+"`") {
			t.Errorf("docs/security.md: route `%s` needs permission `%s` (api/server.go) but its row in the route table says %q: "+
				"move it to the row that names `%s`", key, a.perm, lastCell(row), a.perm)
		}
	}
	for key := range rows {
		if _, ok := s.declared[key]; !ok {
			t.Errorf("docs/security.md: the route table lists `%s`, which the router does not serve: remove it or fix its path", key)
		}
	}
}

var (
	methodPath  = regexp.MustCompile(`^(GET|POST|PUT|PATCH|DELETE) (/\S*)$`)
	methodsOnly = regexp.MustCompile("((?:`(?:GET|POST|PUT|PATCH|DELETE)`(?:, | and | or ))+)`(GET|POST|PUT|PATCH|DELETE) (/[^`]*)`")
	braces      = regexp.MustCompile(`\{([^}]*,[^}]*)\}`)
)

// docRouteRows maps "METHOD /path" to the table row naming it, for every table whose
// header's first cell is "route". A cell names a route as `METHOD /path`; "`PATCH` and
// `PUT /p`" names both methods; {a,b} in a path names each alternative.
func docRouteRows(doc string) map[string]string {
	out := map[string]string{}
	inTable := false
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if strings.TrimSpace(cells[0]) == "route" {
			inTable = true
			continue
		}
		if !inTable {
			continue
		}
		first := cells[0]
		for _, m := range methodsOnly.FindAllStringSubmatch(first, -1) {
			for _, meth := range regexp.MustCompile("`(\\w+)`").FindAllStringSubmatch(m[1], -1) {
				for _, p := range expandBraces(m[3]) {
					out[meth[1]+" "+p] = line
				}
			}
		}
		for _, span := range regexp.MustCompile("`([^`]*)`").FindAllStringSubmatch(first, -1) {
			if m := methodPath.FindStringSubmatch(span[1]); m != nil {
				for _, p := range expandBraces(m[2]) {
					out[m[1]+" "+p] = line
				}
			}
		}
	}
	return out
}

func expandBraces(p string) []string {
	m := braces.FindStringSubmatchIndex(p)
	if m == nil {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[m[2]:m[3]], ",") {
		out = append(out, expandBraces(p[:m[0]]+alt+p[m[1]:])...)
	}
	return out
}

func lastCell(row string) string {
	cells := strings.Split(strings.Trim(row, "|"), "|")
	return strings.TrimSpace(cells[len(cells)-1])
}
