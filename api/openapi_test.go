package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"

	"paysvc/api"
	"paysvc/api/openapi"
)

// servedDescription builds a server exactly as the service does and fetches its
// description over HTTP (no database is needed: the document is built at start).
func servedDescription(t *testing.T, path string, headers ...string) (*api.Server, *httptest.ResponseRecorder) {
	t.Helper()
	srv := api.New(api.Config{PublicBaseURL: "http://localhost"}, api.Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	return srv, rec
}

var echoParamRe = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// TestOpenAPICoversEveryRoute walks Echo's own route list (not the table the
// document is built from) and fails on any route the served document does not
// describe fully, and on any documented operation the router does not serve. It
// logs the coverage figure.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	srv, rec := servedDescription(t, "/api/v1/openapi.json")
	if rec.Code != 200 {
		t.Fatalf("GET /api/v1/openapi.json: %d %s", rec.Code, rec.Body)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	// The console's pages and forms are a document of their own: the router
	// serves the union of the two.
	var console struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(srv.ConsoleOpenAPIDocument(), &console); err != nil {
		t.Fatal(err)
	}
	for p, item := range console.Paths {
		if doc.Paths[p] != nil {
			t.Errorf("%s is in both the API and the console document", p)
		}
		doc.Paths[p] = item
	}
	for _, p := range srv.OpenAPIProblems() {
		t.Errorf("openapi: %s", p)
	}

	perms := map[string]string{}
	for _, r := range srv.Routes() {
		perms[r.Method+" "+r.Path] = r.Permission
	}
	e := srv.Handler().(*echo.Echo)
	served, documented := 0, 0
	seen := map[string]bool{}
	for _, r := range e.Routes() {
		if r.Method == echo.RouteNotFound {
			continue // the catch-all 404 answers unknown paths; it is no operation
		}
		served++
		p := echoParamRe.ReplaceAllString(r.Path, "{$1}")
		key := strings.ToLower(r.Method) + " " + p
		seen[key] = true
		raw, ok := doc.Paths[p][strings.ToLower(r.Method)]
		if !ok {
			t.Errorf("route %s %s is served but not in the document", r.Method, r.Path)
			continue
		}
		var op map[string]any
		if err := json.Unmarshal(raw, &op); err != nil {
			t.Fatal(err)
		}
		if op["x-paysvc-incomplete"] == true {
			t.Errorf("route %s %s has no entry in api/openapi/operations.yaml (described from the route table alone)", r.Method, r.Path)
			continue
		}
		if want := perms[r.Method+" "+r.Path]; op["x-paysvc-permission"] != nil && op["x-paysvc-permission"] != want || op["x-paysvc-permission"] == nil && want != "" {
			t.Errorf("%s %s: x-paysvc-permission %v, the route table says %q", r.Method, r.Path, op["x-paysvc-permission"], want)
		}
		checkOperation(t, r.Method+" "+r.Path, op)
		documented++
	}
	operations := 0
	for p, item := range doc.Paths {
		for method := range item {
			if method == "parameters" {
				continue
			}
			operations++
			if !seen[method+" "+p] {
				t.Errorf("the document describes %s %s, which the router does not serve", strings.ToUpper(method), p)
			}
		}
	}
	t.Logf("openapi coverage: %d of %d served routes documented (%d operations in the API and console documents; the catch-all 404 excluded)",
		documented, served, operations)
	if served < 80 {
		t.Fatalf("only %d routes in the router: the walk is broken", served)
	}
}

// checkOperation holds each operation to what docs/openapi.md promises: who may
// call it, a success response with an example, every error in the error shape.
func checkOperation(t *testing.T, name string, op map[string]any) {
	t.Helper()
	if _, ok := op["security"]; !ok {
		t.Errorf("%s: no security requirement", name)
	}
	if a, _ := op["x-paysvc-auth"].(string); a == "" {
		t.Errorf("%s: no x-paysvc-auth", name)
	}
	if op["summary"] == "" || op["operationId"] == "" {
		t.Errorf("%s: no summary or operationId", name)
	}
	responses, _ := op["responses"].(map[string]any)
	success, errs := 0, 0
	for status, r := range responses {
		resp, _ := r.(map[string]any)
		switch {
		case status[0] == '2' || status == "303": // a console form's answer is a redirect
			success++
			content, _ := resp["content"].(map[string]any)
			if media, ok := content["application/json"].(map[string]any); ok && media["example"] == nil {
				t.Errorf("%s: response %s has no example", name, status)
			}
		case status[0] == '4' || status[0] == '5':
			errs++
			if ref, _ := resp["$ref"].(string); !strings.HasPrefix(ref, "#/components/responses/") {
				t.Errorf("%s: error %s is not one of the shared error responses: %v", name, status, resp)
			}
		}
	}
	if success == 0 {
		t.Errorf("%s: no success response", name)
	}
	for _, s := range []string{"400", "429", "500", "503"} {
		if responses[s] == nil {
			t.Errorf("%s: error %s is not documented", name, s)
		}
	}
	if body, ok := op["requestBody"].(map[string]any); ok {
		media, _ := body["content"].(map[string]any)["application/json"].(map[string]any)
		if media["example"] == nil {
			t.Errorf("%s: the request body has no example", name)
		}
	}
}

// TestOpenAPIDocumentIsValid loads the served document with kin-openapi (OpenAPI 3.1,
// JSON Schema 2020-12) and validates it, examples included: every example shown
// must satisfy its schema.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	_, rec := servedDescription(t, "/api/v1/openapi.json")
	doc, err := openapi3.NewLoader().LoadFromData(rec.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("version %s", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation(), openapi3.EnableMultiError()); err != nil {
		t.Fatalf("the document is not valid: %v", err)
	}
	// Every schema's own examples too (JSON Schema's examples keyword).
	for name, ref := range doc.Components.Schemas {
		for i, ex := range ref.Value.Examples {
			if err := ref.Value.VisitJSON(ex, openapi3.EnableJSONSchema2020()); err != nil {
				t.Errorf("components.schemas.%s examples[%d] does not match the schema: %v", name, i, err)
			}
		}
	}
}

// TestOpenAPIServing: the YAML is the same document as the JSON; both carry a
// strong ETag of their own and a Cache-Control, and a current If-None-Match is 304.
func TestOpenAPIServing(t *testing.T) {
	t.Parallel()
	_, j := servedDescription(t, "/api/v1/openapi.json")
	_, y := servedDescription(t, "/api/v1/openapi.yaml/") // with a trailing slash, as every path
	if j.Code != 200 || y.Code != 200 {
		t.Fatalf("json %d, yaml %d", j.Code, y.Code)
	}
	if ct := y.Header().Get("Content-Type"); ct != "application/yaml" {
		t.Errorf("YAML Content-Type %q", ct)
	}
	if !strings.HasPrefix(j.Header().Get("Content-Type"), "application/json") {
		t.Errorf("JSON Content-Type %q", j.Header().Get("Content-Type"))
	}
	var fromJSON, fromYAML any
	if err := json.Unmarshal(j.Body.Bytes(), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(y.Body.Bytes(), &fromYAML); err != nil {
		t.Fatal(err)
	}
	// Through JSON once more, so numbers compare as numbers.
	b, err := json.Marshal(fromYAML)
	if err != nil {
		t.Fatal(err)
	}
	var yamlAsJSON any
	if err := json.Unmarshal(b, &yamlAsJSON); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromJSON, yamlAsJSON) {
		t.Error("openapi.yaml is not the same document as openapi.json")
	}
	for _, rec := range []*httptest.ResponseRecorder{j, y} {
		if tag := rec.Header().Get("ETag"); !strings.HasPrefix(tag, `"`) || len(tag) < 10 {
			t.Errorf("ETag %q is not a strong validator", tag)
		}
		if cc := rec.Header().Get("Cache-Control"); !strings.Contains(cc, "max-age=") {
			t.Errorf("Cache-Control %q", cc)
		}
	}
	if j.Header().Get("ETag") == y.Header().Get("ETag") {
		t.Error("the JSON and YAML representations share one strong ETag")
	}
	_, again := servedDescription(t, "/api/v1/openapi.json", "If-None-Match", `"stale", `+j.Header().Get("ETag"))
	if again.Code != http.StatusNotModified || again.Body.Len() != 0 {
		t.Errorf("revalidation with the current ETag: %d (%d bytes), want 304 and no body", again.Code, again.Body.Len())
	}
	_, stale := servedDescription(t, "/api/v1/openapi.json", "If-None-Match", `"stale"`)
	if stale.Code != 200 {
		t.Errorf("revalidation with a stale ETag: %d, want 200", stale.Code)
	}
}

// TestOpenAPIListsEveryEventSchema: x-paysvc-events names every JSON Schema in
// docs/events and nothing else.
func TestOpenAPIListsEveryEventSchema(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../docs/events/*.schema.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("docs/events: %v %v", files, err)
	}
	var onDisk, listed []string
	for _, f := range files {
		onDisk = append(onDisk, filepath.Base(f))
	}
	for _, e := range openapi.EventSchemas {
		listed = append(listed, e.File)
		if _, err := os.Stat(filepath.Join("../docs/events", e.File)); err != nil {
			t.Errorf("x-paysvc-events lists %s: %v", e.File, err)
		}
	}
	sort.Strings(onDisk)
	sort.Strings(listed)
	if !reflect.DeepEqual(onDisk, listed) {
		t.Errorf("docs/events holds %v but api/openapi EventSchemas lists %v", onDisk, listed)
	}
	_, rec := servedDescription(t, "/api/v1/openapi.json")
	var doc struct {
		Events []map[string]string `json:"x-paysvc-events"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || len(doc.Events) != len(files) {
		t.Errorf("the served x-paysvc-events has %d entries, want %d (%v)", len(doc.Events), len(files), err)
	}
}
