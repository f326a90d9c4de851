// Package openapi builds the API's OpenAPI 3.1 description (served at
// /api/v1/openapi.json and /api/v1/openapi.yaml) from two owners that cannot
// drift apart silently:
//
//   - the router's own route table (api.Server.Routes): which operations exist, at
//     which method and path, who may call them (the security requirement and
//     x-paysvc-auth), the permission a restricted key needs (x-paysvc-permission),
//     whether Idempotency-Key is honoured, and the error statuses that follow from
//     those (401/403 where a credential is checked, 409/422 where Idempotency-Key
//     is, 404 where a path names a resource, 400/429/500/503 everywhere);
//   - hand-written files embedded here: operations.yaml (per operation: summary,
//     request and response schemas, query parameters, the statuses its handler adds)
//     and components.yaml (the JSON Schema 2020-12 bodies, with an example each).
//
// A route with no entry in operations.yaml is still described, from the route table,
// and marked x-paysvc-incomplete; an entry that names no route is reported. Build
// returns both as Problems, and the api package's tests fail on any, so a route added
// without its description, or removed without removing it, is caught at once.
//
// Beside the routes, the document's webhooks object describes what the service
// POSTs to merchants' webhooks, one entry per topic, with the topic's payload
// schema: an embedded copy of docs/events/<topic>.schema.json (payloads/), which
// a test keeps equal to its source. The merchant console's pages and forms are
// HTML for a browser, so they go to a document of their own (Document.ConsoleJSON)
// and the API document is one a client can be generated from. The JSON is
// indented so that its committed copy, openapi.json, diffs line by line.
//
// The body schemas are checked against real answers by api's
// TestOpenAPIResponsesMatchDocument, with an independent validator (kin-openapi),
// which closes every object so that a field a handler emits and the document does not
// name is drift too.
package openapi
