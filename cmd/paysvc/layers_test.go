package main

import (
	"bytes"
	"go/parser"
	"go/token"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// layers are the groups of packages, by directory (the longest prefix wins), and
// what each may import besides itself (actors/doc.go, README "Layout"). An arrow
// that is not here runs against the architecture: storage reaching into an
// aggregate's decisions, the engine naming an aggregate, outbound delivery
// depending on the engine.
var layers = []struct {
	dir     string
	group   string
	imports []string // groups, or a package path for a single exception
}{
	{"actors/values", "values", nil},
	{"topics", "topics", []string{"values"}},
	{"storage", "storage", []string{"topics", "values"}},
	// The engine's generic money API (Tx.Hold, Release, Debit, Credit) is the
	// wallet aggregate's own commands: the one aggregate it may name.
	{"actors/engine", "engine", []string{"storage", "topics", "values", "paysvc/actors/aggregates/wallet"}},
	{"actors/aggregates", "aggregates", []string{"engine", "storage", "topics", "values"}},
	{"actors/rails", "rails", []string{"storage", "topics", "values"}},
	{"actors/outbound", "outbound", []string{"storage", "topics", "values"}},
	{"actors", "actors", nil},
	// The product surfaces' shared edge (principal, permissions, key format, the
	// error shape, request ids, page headers): what the JSON API and the console
	// both name, so neither imports the other for it.
	{"api/edge", "edge", []string{"values"}},
	// The merchant console: pages over storage reads and, for everything it does,
	// calls of the JSON API's routes through the handler it is given, so it never
	// imports api. It names the refund reasons its form offers.
	{"api/console", "console", []string{"edge", "storage", "values", "paysvc/actors/aggregates/refund"}},
	// The sandbox's developer tools (listen streams, trigger, mail, test clocks):
	// storage and the event topics directly, the rest through the edge.
	{"api/sandbox", "sandbox", []string{"edge", "outbound", "storage", "topics", "values"}},
	// The hosted customer pages: their handlers over storage reads, each given its
	// resource already opened by the capability its path names (package api
	// mounts them and never the reverse), with their templates and /static/
	// assets. They name the subscription statuses the setup page shows.
	{"api/pages", "pages", []string{"edge", "storage", "values", "paysvc/actors/aggregates/subscription"}},
	{"api", "api", []string{"edge", "console", "sandbox", "pages", "aggregates", "engine", "rails", "outbound", "storage", "topics", "values"}},
	// Commands wire everything, except that none links the load generator: it is
	// its own command (cmd/paysvc-bench), so the service binary carries no bench
	// code (TestLayers also checks paysvc's whole dependency list).
	{"cmd", "cmd", []string{"aggregates", "engine", "rails", "outbound", "actors", "api", "edge", "storage", "topics", "values"}},
	{"cmd/paysvc-bench", "bench", []string{"*"}},
	{"ops", "ops", []string{"*"}},
}

// layerOf is the layer of a repository-relative directory.
func layerOf(dir string) (group string, allowed []string, ok bool) {
	best := -1
	for i, l := range layers {
		if (dir == l.dir || strings.HasPrefix(dir, l.dir+"/")) && (best < 0 || len(l.dir) > len(layers[best].dir)) {
			best = i
		}
	}
	if best < 0 {
		return "", nil, false
	}
	return layers[best].group, layers[best].imports, true
}

// isTestSupport reports whether an import path is a test-support package
// (storagetest, kafkatest, mpesatest, servicetest...): as net/http/httptest is
// to net/http, a package whose name ends in "test" exists for tests, and only
// tests and other test-support packages may import it.
func isTestSupport(importPath string) bool {
	return strings.HasSuffix(importPath[strings.LastIndex(importPath, "/")+1:], "test")
}

// TestLayers reads the imports of every non-test Go file and fails on an import
// its layer may not make, or on a test-support package imported outside tests.
// Tests may import more (fixtures).
func TestLayers(t *testing.T) {
	t.Parallel()
	files := 0
	walkGo(t, false, func(path string) error {
		rel := strings.TrimPrefix(filepath.ToSlash(filepath.Dir(path)), repoRoot+"/")
		group, allowed, ok := layerOf(rel)
		if !ok {
			t.Errorf("%s: a Go package outside the layers (cmd, actors, api, topics, storage, ops)", rel)
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if !strings.HasPrefix(p, "paysvc/") {
				continue
			}
			if isTestSupport(p) && !isTestSupport("paysvc/"+rel) {
				t.Errorf("%s/%s imports %s: a test-support package (name ending in \"test\") is for tests only, never the product",
					rel, filepath.Base(path), p)
				continue
			}
			to, _, ok := layerOf(strings.TrimPrefix(p, "paysvc/"))
			if !ok {
				t.Errorf("%s imports %s, which is in no layer", rel, p)
				continue
			}
			if to == group || slices.Contains(allowed, "*") || slices.Contains(allowed, to) || slices.Contains(allowed, p) {
				continue
			}
			t.Errorf("%s/%s (%s) imports %s (%s): not allowed by the layers (cmd/paysvc/layers_test.go, actors/doc.go)",
				rel, filepath.Base(path), group, p, to)
		}
		return nil
	})
	if files < 100 {
		t.Fatalf("read only %d Go files: is the walk rooted at the repository?", files)
	}
	// The import rule above sees direct imports only; the service binary must not
	// link the bench through any path, so its whole dependency list is checked.
	out, err := osexec.Command("go", "list", "-deps", "paysvc/cmd/paysvc").Output()
	if err != nil {
		t.Fatalf("go list -deps paysvc/cmd/paysvc: %v", err)
	}
	if len(bytes.TrimSpace(out)) == 0 {
		t.Fatal("go list -deps paysvc/cmd/paysvc listed nothing")
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "bench") {
			t.Errorf("the service binary links %s: the load generator belongs to cmd/paysvc-bench only", p)
		}
	}
}

// The layer table itself: a package is put in the group of its longest prefix.
func TestLayerOf(t *testing.T) {
	for dir, want := range map[string]string{
		"actors/values/money": "values", "actors/engine/aggregate": "engine", "actors/engine": "engine",
		"actors/aggregates/wallet/walletkind": "aggregates", "actors": "actors", "topics/tracing": "topics",
		"actors/outbound/relay": "outbound", "cmd/paysvc/service": "cmd", "storage/storagetest": "storage",
		"cmd/paysvc-bench": "bench", "cmd/paysvc-bench/bench": "bench",
	} {
		if got, _, ok := layerOf(dir); !ok || got != want {
			t.Errorf("layerOf(%q) = %q, %v; want %q", dir, got, ok, want)
		}
	}
	if _, _, ok := layerOf("tracing"); ok {
		t.Error("a top-level directory outside the fixed layout has a layer")
	}
}

// The service binary carries no test double: none of its dependencies is a
// test-support package (the Daraja fake, the database and broker fixtures).
// TestLayers forbids the import file by file; this asks the go tool for the
// whole build, as `go list -deps ./cmd/paysvc` shows it.
func TestProductHasNoTestSupport(t *testing.T) {
	t.Parallel()
	goTool, err := osexec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH; TestLayers still checks each import")
	}
	cmd := osexec.Command(goTool, "list", "-deps", "./cmd/paysvc")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/paysvc: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "paysvc/actors/rails/mpesa") {
		t.Fatalf("go list -deps ./cmd/paysvc lists %d packages without paysvc/actors/rails/mpesa: not the service's build", len(deps))
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "paysvc/") && isTestSupport(p) || p == "net/http/httptest" {
			t.Errorf("the service binary depends on %s, a test-support package", p)
		}
	}
}
