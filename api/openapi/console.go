package openapi

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// consoleTag marks a console operation in operations.yaml.
const consoleTag = "console"

// consoleSecuritySchemes is the console's only credential.
var consoleSecuritySchemes = map[string]any{
	"consoleSession": map[string]any{"type": "apiKey", "in": "cookie", "name": "console_session",
		"description": "The merchant console's session (__Host-console_session on a live server), made at /console/sign-in from a secret key; the browser never holds the key. docs/security.md, Console sessions."},
}

const consoleDescription = `The merchant console of paysvc: HTML pages and forms for a browser, behind a
session cookie (docs/console.md). Not an interface to generate a client from: each action calls
the API operation its description names (the API's own document, /api/v1/openapi.json), and a form
answers 303 See Other to the page it changed. Every path is also served with a trailing slash.`

// consoleDocument describes the console routes in a document of their own, with
// the components they use (the error responses and their schema) and no other.
func consoleDocument(version string, paths, comps map[string]any) ([]byte, error) {
	doc := document{
		OpenAPI:           "3.1.0",
		Info:              map[string]any{"title": "paysvc merchant console", "version": version, "description": consoleDescription},
		JSONSchemaDialect: "https://spec.openapis.org/oas/3.1/dialect/base",
		Servers:           []map[string]any{{"url": "/", "description": "The server that serves the console."}},
		Tags:              []map[string]any{{"name": consoleTag, "description": "The merchant console: HTML pages and forms behind a session (docs/console.md)."}},
		Paths:             paths,
	}
	used, err := usedComponents(paths, comps)
	if err != nil {
		return nil, err
	}
	used["securitySchemes"] = consoleSecuritySchemes
	doc.Components = used
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("openapi: encode the console document: %w", err)
	}
	return append(out, '\n'), nil
}

// usedComponents is the part of comps that root refers to, directly or through
// another component ("#/components/<kind>/<name>").
func usedComponents(root any, comps map[string]any) (map[string]any, error) {
	out := map[string]any{}
	queue, err := refs(root)
	if err != nil {
		return nil, err
	}
	for len(queue) > 0 {
		ref := queue[0]
		queue = queue[1:]
		kind, name, _ := strings.Cut(strings.TrimPrefix(ref, "#/components/"), "/")
		of, _ := comps[kind].(map[string]any)
		c, ok := of[name]
		if !ok {
			return nil, fmt.Errorf("openapi: the console document refers to %s, which is no component", ref)
		}
		into, _ := out[kind].(map[string]any)
		if into == nil {
			into = map[string]any{}
			out[kind] = into
		}
		if _, done := into[name]; done {
			continue
		}
		into[name] = c
		more, err := refs(c)
		if err != nil {
			return nil, err
		}
		queue = append(queue, more...)
	}
	return out, nil
}

// refs lists every $ref in v, sorted, through its JSON form (v mixes structs and
// maps).
func refs(v any) ([]string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	var out []string
	var walk func(any)
	walk = func(n any) {
		switch x := n.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && k == "$ref" {
					out = append(out, s)
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(tree)
	sort.Strings(out)
	return out, nil
}
