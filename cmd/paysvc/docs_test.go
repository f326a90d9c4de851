package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// The tests in this file keep the operator's documents true where a machine can tell:
// the README's variables and their defaults, the Makefile's targets, the alerts and
// the metrics the docs name. Each failure says what to add or change, and where.

const repoRoot = "../.."

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docVar is one variable named by a README table whose first column is "variable".
type docVar struct {
	name, def string // def: the backticked default, "" for (empty), "?" when not stated as a value
	line      string
}

var (
	backticked = regexp.MustCompile("`([^`]*)`")
	envName    = regexp.MustCompile(`^PAYSVC_[A-Z0-9_]+$`)
)

// readmeVars parses every README table whose header's first cell is "variable". A row
// names one or more variables (`PAYSVC_A` / `PAYSVC_B`; `PAYSVC_WEBHOOK_X`, `_Y` stands
// for PAYSVC_WEBHOOK_Y) and their defaults in the second cell, backticked, in the same
// order; one default for several variables is each one's; "(empty)" is an empty value.
func readmeVars(t *testing.T, readme string) map[string]docVar {
	t.Helper()
	out := map[string]docVar{}
	inTable := false
	for _, line := range strings.Split(readme, "\n") {
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if strings.TrimSpace(cells[0]) == "variable" {
			inTable = true
			continue
		}
		if !inTable || len(cells) < 2 || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			continue
		}
		var names []string
		prefix := ""
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			n := m[1]
			if strings.HasPrefix(n, "_") && prefix != "" {
				n = prefix + n
			}
			if parts := strings.SplitN(n, "_", 3); len(parts) == 3 && parts[0] == "PAYSVC" {
				prefix = parts[0] + "_" + parts[1]
			}
			names = append(names, strings.SplitN(n, "=", 2)[0])
		}
		var defs []string
		cell := strings.TrimSpace(cells[1])
		switch {
		case cell == "(empty)":
			defs = []string{""}
		default:
			for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
				defs = append(defs, m[1])
			}
		}
		for i, n := range names {
			d := "?"
			switch {
			case len(defs) == len(names):
				d = defs[i]
			case len(defs) == 1:
				d = defs[0]
			}
			out[n] = docVar{name: n, def: d, line: line}
		}
	}
	if len(out) < 30 {
		t.Fatalf("README.md: found only %d variables in tables whose first column is \"variable\": the parser does not see them", len(out))
	}
	return out
}

// codeDefaults are the defaults config.go gives its get/dur/num calls as literals
// ("" for get calls with an empty default): the (empty) rows are checked against them.
func codeDefaults(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "service/config.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 2 {
			return true
		}
		fn, ok := call.Fun.(*ast.Ident)
		if !ok || (fn.Name != "get" && fn.Name != "dur" && fn.Name != "num") {
			return true
		}
		k, ok := call.Args[0].(*ast.BasicLit)
		if !ok || k.Kind != token.STRING {
			return true
		}
		name, _ := strconv.Unquote(k.Value)
		if v, ok := call.Args[1].(*ast.BasicLit); ok && v.Kind == token.STRING {
			out[name], _ = strconv.Unquote(v.Value)
		} else {
			out[name] = "?"
		}
		return true
	})
	return out
}

// defaultsNotValues are variables whose default is not one value the README can
// state; the reason says where it is documented instead.
var defaultsNotValues = map[string]string{
	"PAYSVC_FEES":            "the default schedule is docs/fees.md's table",
	"PAYSVC_INSTANCE_ID":     "host, pid and a random alias: differs in every process",
	"PAYSVC_PUBLIC_BASE_URL": "derived from PAYSVC_HTTP_ADDR at start",
}

// readVars is every PAYSVC_* variable the code reads: FromEnv's (asked of a recording
// getenv) and the os.Getenv / LookupEnv / getenv calls of non-test Go files, plus the
// variables ops/pg/pg.sh reads (the Makefile's database).
func readVars(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	if _, err := service.FromEnv(func(k string) string {
		// Each read also asks for NAME_FILE (README, "Configuration"): not a name of its own.
		if base, ok := strings.CutSuffix(k, "_FILE"); ok && out[base] != "" {
			return ""
		}
		out[k] = "cmd/paysvc/service/config.go (FromEnv)"
		return ""
	}); err != nil {
		t.Fatal(err)
	}
	call := regexp.MustCompile(`(?:Getenv|LookupEnv|getenv)\("(PAYSVC_[A-Z0-9_]+)"\)`)
	walkGo(t, false, func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range call.FindAllStringSubmatch(string(b), -1) {
			if _, ok := out[m[1]]; !ok {
				out[m[1]] = strings.TrimPrefix(path, repoRoot+"/")
			}
		}
		return nil
	}, "testdata")
	for _, m := range regexp.MustCompile(`\$\{(PAYSVC_[A-Z0-9_]+)`).FindAllStringSubmatch(readRepoFile(t, "ops/pg/pg.sh"), -1) {
		if _, ok := out[m[1]]; !ok {
			out[m[1]] = "ops/pg/pg.sh"
		}
	}
	return out
}

// TestReadmeDocumentsEveryVariable: every PAYSVC_* variable the code reads is in one
// of README's variable tables, and the default a row states is the one the code uses.
func TestReadmeDocumentsEveryVariable(t *testing.T) {
	t.Parallel()
	docs := readmeVars(t, readRepoFile(t, "README.md"))
	read := readVars(t)
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range read {
			if !yield(k) {
				return
			}
		}
	})
	for _, name := range names {
		if _, ok := docs[name]; !ok {
			t.Errorf("README.md: %s is read by %s but is in no variable table: add a row "+
				"\"| `%s` | `<default>` | <what it does> |\" to \"## Configuration\" (or, for a variable of "+
				"the tests or the Makefile, to \"Development and tests\")", name, read[name], name)
		}
	}
	for name := range docs {
		if envName.MatchString(name) {
			if _, ok := read[name]; !ok {
				t.Errorf("README.md: the row for %s documents a variable nothing reads: remove it or fix its name", name)
			}
		}
	}

	// Defaults of FromEnv's variables: the stated default, set explicitly, must give
	// the configuration that nothing set gives.
	const instance = "docs-test"
	base := map[string]string{"PAYSVC_INSTANCE_ID": instance}
	fromEnv := func(env map[string]string) (service.Config, error) {
		return service.FromEnv(func(k string) string { return env[k] })
	}
	want, err := fromEnv(base)
	if err != nil {
		t.Fatal(err)
	}
	literal := codeDefaults(t)
	for _, name := range names {
		d, ok := docs[name]
		if !ok || read[name] != "cmd/paysvc/service/config.go (FromEnv)" {
			continue
		}
		if _, skip := defaultsNotValues[name]; skip {
			continue
		}
		switch d.def {
		case "?":
			t.Errorf("README.md: the row of %s states no default the test can read: put the default in backticks in the "+
				"second column (one per variable, in the row's order), \"(empty)\" for none, or list %s in "+
				"defaultsNotValues in cmd/paysvc/docs_test.go with the reason\n  row: %s", name, name, d.line)
		case "":
			// A variable read outside config.go's literal getters (tracing.FromEnv
			// reads the OTEL_* ones) has no literal to compare: unset is empty.
			if lit, ok := literal[name]; ok && lit != "" {
				t.Errorf("README.md: %s's default is \"(empty)\", but config.go's default is %q: write it in the row's second column", name, lit)
			}
		default:
			env := map[string]string{name: d.def}
			for k, v := range base {
				env[k] = v
			}
			got, err := fromEnv(env)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("README.md: %s's default is `%s` in the table, but setting it to that is not what the code does "+
					"when it is unset (cmd/paysvc/service/config.go FromEnv; err %v): write the code's default in the row", name, d.def, err)
			}
		}
	}

	// Defaults of the variables ops/pg/pg.sh reads (${NAME:-default}).
	for _, m := range regexp.MustCompile(`\$\{(PAYSVC_[A-Z0-9_]+):-([^}]*)\}`).FindAllStringSubmatch(readRepoFile(t, "ops/pg/pg.sh"), -1) {
		if strings.Contains(m[2], "$") {
			continue // computed (the newest installed server): the row says how
		}
		if d, ok := docs[m[1]]; ok && d.def != "?" && d.def != m[2] {
			t.Errorf("README.md: %s's default is `%s`, but ops/pg/pg.sh uses %q: fix the row", m[1], d.def, m[2])
		}
	}
}

// TestMakefileTargetsDocumented: every Makefile target has a `## ` description (so
// `make help` lists it) and README names it as `make <target>`.
func TestMakefileTargetsDocumented(t *testing.T) {
	t.Parallel()
	mk := readRepoFile(t, "Makefile")
	readme := readRepoFile(t, "README.md")
	target := regexp.MustCompile(`(?m)^([a-zA-Z0-9][a-zA-Z0-9_.-]*):([^=].*)?$`)
	n := 0
	for _, m := range target.FindAllStringSubmatch(mk, -1) {
		name := m[1]
		if strings.HasPrefix(name, ".") {
			continue
		}
		n++
		if !strings.Contains(m[2], "## ") {
			t.Errorf("Makefile: target %s has no \"## <what it does>\" after its prerequisites, so `make help` does not list it", name)
		}
		if !strings.Contains(readme, "`make "+name+"`") && !strings.Contains(readme, "`make "+name+" ") {
			t.Errorf("README.md: the Makefile target %s is not named as `make %s`: add it to the targets table under \"## Two commands\"", name, name)
		}
	}
	if n < 5 {
		t.Fatalf("Makefile: found only %d targets: the parser does not see them", n)
	}
	for _, m := range regexp.MustCompile("`make ([a-z][a-z0-9_.-]*)").FindAllStringSubmatch(readme, -1) {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(m[1]) + `:`).MatchString(mk) {
			t.Errorf("README.md: names `make %s`, which the Makefile does not define", m[1])
		}
	}
}

// docsNamingOps are the documents whose alert and metric names operators rely on.
func docsNamingOps(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{"README.md": readRepoFile(t, "README.md"), "ops/runbooks.md": readRepoFile(t, "ops/runbooks.md")}
	for _, dir := range []string{"docs", "docs/adr"} {
		ents, err := os.ReadDir(filepath.Join(repoRoot, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".md") {
				out[dir+"/"+e.Name()] = readRepoFile(t, dir+"/"+e.Name())
			}
		}
	}
	return out
}

// TestDocsNameOnlyExistingAlerts: every alert a document names (Paysvc<Name>) is a rule
// in ops/prometheus/alerts.yml.
func TestDocsNameOnlyExistingAlerts(t *testing.T) {
	t.Parallel()
	rules := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(readRepoFile(t, "ops/prometheus/alerts.yml"), -1) {
		rules[m[1]] = true
	}
	if len(rules) < 5 {
		t.Fatalf("ops/prometheus/alerts.yml: found only %d alerts", len(rules))
	}
	alert := regexp.MustCompile(`\bPaysvc[A-Z][A-Za-z0-9]+\b`)
	docs := docsNamingOps(t)
	docs["ops/prometheus/alerts.yml"] = readRepoFile(t, "ops/prometheus/alerts.yml")
	for _, doc := range sortedKeys(docs) {
		for _, name := range uniq(alert.FindAllString(docs[doc], -1)) {
			if !rules[name] {
				t.Errorf("%s names the alert %s, which ops/prometheus/alerts.yml does not define: add the rule there "+
					"(with its runbook section in ops/runbooks.md) or fix the name", doc, name)
			}
		}
	}
	// Every runbook link (ops/runbooks.md#section) of the alerts and the docs leads to
	// a section: a heading "## section".
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(docs["ops/runbooks.md"], -1) {
		sections[strings.ReplaceAll(strings.ToLower(strings.TrimSpace(m[1])), " ", "-")] = true
	}
	for _, doc := range sortedKeys(docs) {
		for _, m := range regexp.MustCompile(`runbooks\.md#([a-z0-9-]+)`).FindAllStringSubmatch(docs[doc], -1) {
			if !sections[m[1]] {
				t.Errorf("%s links ops/runbooks.md#%s, which has no heading \"## %s\": add the runbook section or fix the link", doc, m[1], m[1])
			}
		}
	}
}

// metricsOfOtherRoles are paysvc_* names the docs may name that a `paysvc serve` with
// every role does not serve, each with the reason. None today.
var metricsOfOtherRoles = map[string]string{}

// namesNotMetrics are paysvc_* words of the docs that name no metric.
var namesNotMetrics = map[string]string{
	"paysvc_cluster": "make cluster's database (docs/cluster.md)",
}

// TestDocsNameOnlyServedMetrics: every paysvc_* metric a document names is served by a
// service running every role (in its /metrics scrape, or registered with no sample
// yet), and every metric the service defines is in docs/metrics.md. Names of SQL
// functions (storage/migrations) are not metrics.
func TestDocsNameOnlyServedMetrics(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	scrape := env.Metrics()
	served := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (paysvc_[a-z0-9_]+) `).FindAllStringSubmatch(scrape, -1) {
		served[m[1]] = true
	}
	sqlFuncs := map[string]bool{}
	migrations, err := filepath.Glob(filepath.Join(repoRoot, "storage/migrations/*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range migrations {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?i)FUNCTION (paysvc_[a-z0-9_]+)`).FindAllStringSubmatch(string(b), -1) {
			sqlFuncs[m[1]] = true
		}
	}
	exists := func(name string) bool {
		if served[name] || registered(name) {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && (served[base] || registered(base)) {
				return true
			}
		}
		return false
	}
	// A name followed by "<" or "*" is a pattern (paysvc_<subsystem>_...), not a metric.
	// A name ending in "_" or followed by "<" or "*" is a pattern (paysvc_<subsystem>,
	// paysvc_apply_<kind>); one followed by "(" is a call of a SQL function.
	name := regexp.MustCompile(`paysvc_[a-z0-9_]+([<*(]?)`)
	docs := docsNamingOps(t)
	reported := map[string]bool{}
	for _, doc := range sortedKeys(docs) {
		for _, m := range name.FindAllStringSubmatch(docs[doc], -1) {
			n := strings.TrimRight(m[0], "<*(")
			if m[1] != "" || strings.HasSuffix(n, "_") || sqlFuncs[n] || metricsOfOtherRoles[n] != "" || namesNotMetrics[n] != "" || exists(n) || reported[doc+n] {
				continue
			}
			reported[doc+n] = true
			t.Errorf("%s names the metric %s, which a service with every role does not serve: fix the name, define the "+
				"metric, or (if another binary or role defines it) add it to metricsOfOtherRoles in cmd/paysvc/docs_test.go with the reason", doc, n)
		}
	}
	catalogue := readRepoFile(t, "docs/metrics.md")
	for _, n := range uniq(append(slices.Collect(mapKeys(served)), sourceMetricNames(t)...)) {
		if sqlFuncs[n] || !exists(n) {
			continue
		}
		if !strings.Contains(catalogue, "`"+n+"`") {
			t.Errorf("docs/metrics.md: the service serves %s, which the catalogue does not list: add a row "+
				"\"| `%s` | <type> | <labels> | <meaning> |\" to its role's table", n, n)
		}
	}
}

// registered reports whether the default Prometheus registry (the one /metrics
// serves) holds a metric of this name: a second collector of the same name with
// another help string is refused exactly when one is.
func registered(name string) bool {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: "docs_test probe " + name})
	err := prometheus.DefaultRegisterer.Register(c)
	if err == nil {
		prometheus.DefaultRegisterer.Unregister(c)
		return false
	}
	return true
}

// sourceMetricNames are the Name: "paysvc_..." literals of non-test Go files: metrics
// a vector defines even before its first sample.
func sourceMetricNames(t *testing.T) []string {
	t.Helper()
	var out []string
	lit := regexp.MustCompile(`Name:\s*"(paysvc_[a-z0-9_]+)"`)
	walkGo(t, false, func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
			out = append(out, m[1])
		}
		return nil
	})
	return out
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func uniq(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// historyRef is a reference to a work session or an issue by number ("session",
// "sessions", "issue" or "Issue" and then a number, "#" or not), also across a line
// break of a comment.
var historyRef = regexp.MustCompile(`(?i)\b(sessions?|issues?)\s+#?[0-9]`)

// historyDocs may tell history: docs/benchmarks-history.md is the record of what was
// measured when, and an ADR records a decision as it was taken.
func historyDoc(rel string) bool {
	return rel == "docs/benchmarks-history.md" || strings.HasPrefix(rel, "docs/adr/")
}

// TestNoHistoryInCommentsOrDocs: Go comments and the documents (every *.md but
// docs/benchmarks-history.md and docs/adr/) say what is and why, not which session or
// issue made it so. History goes in git and docs/benchmarks-history.md; a comment
// naming "session N" or "issue N" ages when the next one lands and tells a reader
// nothing about the code.
func TestNoHistoryInCommentsOrDocs(t *testing.T) {
	t.Parallel()
	goFiles, docs := 0, 0
	walkRepo(t, func(path string) error {
		rel := strings.TrimPrefix(filepath.ToSlash(path), repoRoot+"/")
		switch {
		case strings.HasSuffix(path, ".go"):
			goFiles++
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, g := range f.Comments {
				// The group's text joins its lines, so a reference split across two
				// lines ("issue" and "11") is found too.
				for _, m := range historyRef.FindAllString(g.Text(), -1) {
					t.Errorf("%s:%d: a comment group names %q: say why the code is as it is now; history goes in git and docs/benchmarks-history.md",
						rel, fset.Position(g.Pos()).Line, m)
				}
			}
		case strings.HasSuffix(path, ".md") && !historyDoc(rel):
			docs++
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, loc := range historyRef.FindAllIndex(src, -1) {
				t.Errorf("%s:%d: names %q: say what is; history goes in git and docs/benchmarks-history.md",
					rel, lineOf(src, loc[0]), src[loc[0]:loc[1]])
			}
		}
		return nil
	})
	if goFiles < 100 || docs < 10 {
		t.Fatalf("read only %d Go files and %d documents: is the walk rooted at the repository?", goFiles, docs)
	}
}

// lineOf is the 1-based line of byte offset off in src.
func lineOf(src []byte, off int) int {
	return 1 + strings.Count(string(src[:off]), "\n")
}
