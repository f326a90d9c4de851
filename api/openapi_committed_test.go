package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"paysvc/actors/outbound/webhooks"
)

var updateOpenAPI = flag.Bool("update", false, "rewrite api/openapi/openapi.json and console.json from the served documents")

// regenerate is the one command that rewrites the committed documents.
const regenerate = "go test ./api -run TestOpenAPICommitted -update"

// TestOpenAPICommitted: api/openapi/openapi.json is the document GET
// /api/v1/openapi.json serves, byte for byte, and console.json the console's, so a
// change to the interface shows in review as a diff of the description.
func TestOpenAPICommitted(t *testing.T) {
	t.Parallel()
	srv, rec := servedDescription(t, "/api/v1/openapi.json")
	if rec.Code != 200 {
		t.Fatalf("GET /api/v1/openapi.json: %d", rec.Code)
	}
	if !bytes.Equal(rec.Body.Bytes(), srv.OpenAPIDocument()) {
		t.Fatal("the served document is not Server.OpenAPIDocument")
	}
	for file, served := range map[string][]byte{
		"openapi/openapi.json": rec.Body.Bytes(),
		"openapi/console.json": srv.ConsoleOpenAPIDocument(),
	} {
		if *updateOpenAPI {
			if err := os.WriteFile(file, served, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		committed, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("api/%s: %v; run %s", file, err, regenerate)
			continue
		}
		if d := firstDifference(committed, served); d != "" {
			t.Errorf("api/%s is not the served document: %s\nrun %s", file, d, regenerate)
		}
	}
}

// firstDifference names the first line where committed and served differ, or "".
func firstDifference(committed, served []byte) string {
	if bytes.Equal(committed, served) {
		return ""
	}
	a, b := strings.Split(string(committed), "\n"), strings.Split(string(served), "\n")
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y || i >= len(a) || i >= len(b) {
			return fmt.Sprintf("line %d is\n\t%q committed,\n\t%q served", i+1, x, y)
		}
	}
	return "they differ" // unreachable: unequal bytes differ on some line
}

// TestOpenAPIWebhooks: the webhooks object has one POST per topic a webhook can
// subscribe to, whose body's data is that topic's payload schema as
// docs/events/<topic>.schema.json states it (generated from the Go types), and
// whose parameters are the delivery's headers.
func TestOpenAPIWebhooks(t *testing.T) {
	t.Parallel()
	srv, _ := servedDescription(t, "/api/v1/openapi.json")
	var doc struct {
		Webhooks map[string]map[string]struct {
			Parameters  []map[string]string `json:"parameters"`
			RequestBody struct {
				Content map[string]struct {
					Schema map[string]string `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
			Responses map[string]any `json:"responses"`
		} `json:"webhooks"`
		Components struct {
			Schemas    map[string]map[string]any `json:"schemas"`
			Parameters map[string]map[string]any `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(srv.OpenAPIDocument(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Webhooks) != len(webhooks.Topics) {
		t.Errorf("%d webhooks, want one per topic %v", len(doc.Webhooks), webhooks.Topics)
	}
	schema := func(ref string) map[string]any {
		return doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
	}
	for _, topic := range webhooks.Topics {
		post, ok := doc.Webhooks[topic]["post"]
		if !ok {
			t.Errorf("webhooks.%s has no post", topic)
			continue
		}
		var headers []string
		for _, p := range post.Parameters {
			headers = append(headers, doc.Components.Parameters[strings.TrimPrefix(p["$ref"], "#/components/parameters/")]["name"].(string))
		}
		if want := []string{"X-SERVICE-Signature", "webhook-id", "webhook-timestamp", "webhook-signature"}; !reflect.DeepEqual(headers, want) {
			t.Errorf("webhooks.%s headers %v, want %v", topic, headers, want)
		}
		if post.Responses["200"] == nil {
			t.Errorf("webhooks.%s: no 200 (received)", topic)
		}
		body := schema(post.RequestBody.Content["application/json"].Schema["$ref"])
		props, _ := body["properties"].(map[string]any)
		if got := fmt.Sprint(body["required"]); got != "[topic data]" || len(props) != 3 || props["challenge"] == nil {
			t.Errorf("webhooks.%s body is not {topic, data, challenge?}: %v", topic, body)
		}
		data, _ := props["data"].(map[string]any)
		ref, _ := data["$ref"].(string)
		raw, err := os.ReadFile(filepath.Join("..", "docs", "events", topic+".schema.json"))
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		delete(want, "$schema")
		if got := schema(ref); !reflect.DeepEqual(got, want) {
			t.Errorf("webhooks.%s data (%s) is not docs/events/%s.schema.json; run go test ./api/openapi -run TestPayloadCopies -update", topic, ref, topic)
		}
	}
}

// TestOpenAPIConsoleDocumentIsValid: the console's document, which the API
// document leaves out, is valid OpenAPI 3.1 too, examples included.
func TestOpenAPIConsoleDocumentIsValid(t *testing.T) {
	t.Parallel()
	srv, _ := servedDescription(t, "/api/v1/openapi.json")
	doc, err := openapi3.NewLoader().LoadFromData(srv.ConsoleOpenAPIDocument())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation(), openapi3.EnableMultiError()); err != nil {
		t.Fatalf("the console document is not valid: %v", err)
	}
	if doc.Paths.Len() == 0 || doc.Components.SecuritySchemes["consoleSession"] == nil {
		t.Errorf("the console document has %d paths and schemes %v", doc.Paths.Len(), doc.Components.SecuritySchemes)
	}
}
