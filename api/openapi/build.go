package openapi

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Auth is how a route's caller proves who they are (the api package's route kinds).
type Auth string

const (
	AuthSecret         Auth = "secret_key"
	AuthPublicOrSecret Auth = "secret_or_public_key"
	// AuthCollection also admits a hosted checkout's signature in the body.
	AuthCollection Auth = "secret_public_key_or_checkout_signature"
	// AuthStatus also admits the signature returned with one collection.
	AuthStatus    Auth = "secret_public_key_or_collection_signature"
	AuthPublicKey Auth = "public_key"
	// AuthSandbox is the unrestricted secret key, on a sandbox server only.
	AuthSandbox  Auth = "sandbox_secret_key"
	AuthCallback Auth = "provider_path_token"
	AuthNone     Auth = "none"
	// AuthConsole is a merchant console page or form: the session cookie a secret
	// key became at sign-in (docs/console.md).
	AuthConsole Auth = "console_session"
)

// Route is one route of the router, as its declaration states it.
type Route struct {
	Method, Path string // Echo's form: /wallets/:wallet_id
	Auth         Auth
	Permission   string // what a restricted secret key needs; "" where none is accepted
	Idempotent   bool   // honours Idempotency-Key
	Capability   string // what the path's id or token opens, for an open route that names one
}

// Document is the built description.
type Document struct {
	JSON, YAML []byte
	// ConsoleJSON is the merchant console's pages and forms (AuthConsole routes),
	// a document of its own, indented as JSON is.
	ConsoleJSON []byte
	// JSONETag and YAMLETag are strong validators of each encoding.
	JSONETag, YAMLETag string
	// Operations is how many operations the two documents describe; Problems says
	// what is missing or stale (a route without its entry in operations.yaml, an
	// entry naming no route, an unknown schema or parameter). Empty when whole.
	Operations int
	Problems   []string
}

//go:embed operations.yaml
var operationsYAML []byte

//go:embed components.yaml
var componentsYAML []byte

// opSpec is one entry of operations.yaml.
type opSpec struct {
	// Routes are "METHOD /echo/path", optionally followed by "as operationId" for
	// a route of the same handler under another name (an alias path or method).
	Routes      []string `yaml:"routes"`
	Tags        []string `yaml:"tags"`
	Summary     string   `yaml:"summary"`
	Description string   `yaml:"description"`
	Query       []string `yaml:"query"`   // names under components.parameters
	Headers     []string `yaml:"headers"` // names under components.parameters
	Request     string   `yaml:"request"` // a schema under components.schemas
	// RequestOptional: the body may be absent (an empty body is an empty object).
	RequestOptional bool             `yaml:"request_optional"`
	Responses       map[int]respSpec `yaml:"responses"`
	Errors          []int            `yaml:"errors"` // statuses the handler adds to the derived ones
}

// respSpec is a success response: a schema name (JSON), or a map naming another
// content type.
type respSpec struct {
	Schema      string `yaml:"schema"`
	ContentType string `yaml:"content_type"`
	Description string `yaml:"description"`
}

func (r *respSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		r.Schema = n.Value
		return nil
	}
	type plain respSpec
	return n.Decode((*plain)(r))
}

type operationsFile struct {
	PathParameters map[string]string `yaml:"path_parameters"`
	Operations     map[string]opSpec `yaml:"operations"`
}

// document is the top level, in the order readers expect.
type document struct {
	OpenAPI           string           `json:"openapi" yaml:"openapi"`
	Info              map[string]any   `json:"info" yaml:"info"`
	JSONSchemaDialect string           `json:"jsonSchemaDialect" yaml:"jsonSchemaDialect"`
	Servers           []map[string]any `json:"servers" yaml:"servers"`
	Tags              []map[string]any `json:"tags" yaml:"tags"`
	Events            []map[string]any `json:"x-paysvc-events,omitempty" yaml:"x-paysvc-events,omitempty"`
	Paths             map[string]any   `json:"paths" yaml:"paths"`
	Webhooks          map[string]any   `json:"webhooks,omitempty" yaml:"webhooks,omitempty"`
	Components        map[string]any   `json:"components" yaml:"components"`
}

type operation struct {
	OperationID string                `json:"operationId" yaml:"operationId"`
	Tags        []string              `json:"tags" yaml:"tags"`
	Summary     string                `json:"summary" yaml:"summary"`
	Description string                `json:"description,omitempty" yaml:"description,omitempty"`
	Parameters  []any                 `json:"parameters,omitempty" yaml:"parameters,omitempty"`
	RequestBody map[string]any        `json:"requestBody,omitempty" yaml:"requestBody,omitempty"`
	Responses   map[string]any        `json:"responses" yaml:"responses"`
	Security    []map[string][]string `json:"security" yaml:"security"`
	Auth        Auth                  `json:"x-paysvc-auth" yaml:"x-paysvc-auth"`
	Permission  string                `json:"x-paysvc-permission,omitempty" yaml:"x-paysvc-permission,omitempty"`
	Capability  string                `json:"x-paysvc-capability,omitempty" yaml:"x-paysvc-capability,omitempty"`
	Idempotent  bool                  `json:"x-paysvc-idempotent,omitempty" yaml:"x-paysvc-idempotent,omitempty"`
	SandboxOnly bool                  `json:"x-paysvc-sandbox-only,omitempty" yaml:"x-paysvc-sandbox-only,omitempty"`
	AliasOf     string                `json:"x-paysvc-alias-of,omitempty" yaml:"x-paysvc-alias-of,omitempty"`
	Incomplete  bool                  `json:"x-paysvc-incomplete,omitempty" yaml:"x-paysvc-incomplete,omitempty"`
}

// errorResponses are the shared error responses: every one has the error shape of
// api/errors.go.
var errorResponses = map[int]struct{ name, description, code string }{
	400: {"BadRequest", "The request is invalid: a field, a query parameter, or the body's JSON or text. `errors[0].attr` names the field when there is one.", "invalid"},
	401: {"Unauthorized", "No credential, or one that is wrong, revoked, of the other environment, or not accepted on this route.", "authentication_failed"},
	402: {"PaymentRequired", "The card was declined, or its issuer asks for a challenge step.", "card_declined"},
	403: {"Forbidden", "The key is restricted and lacks the route's permission (the detail names it), or the merchant cannot transact.", "permission_denied"},
	404: {"NotFound", "No such resource for this merchant (another merchant's resource is answered the same), or the path's token or capability is not one this server honours.", "not_found"},
	409: {"Conflict", "A request with the same Idempotency-Key is still being processed, or its stored outcome expired.", "idempotency_key_in_use"},
	413: {"PayloadTooLarge", "The request body is larger than the route accepts.", "request_too_large"},
	422: {"UnprocessableEntity", "The Idempotency-Key was used before with a different request, or the engine set the command aside.", "idempotency_key_reused"},
	429: {"TooManyRequests", "A rate limit (per key or per client address) was reached; retry after Retry-After seconds.", "throttled"},
	500: {"InternalError", "An internal error; the detail says only \"internal error\", and request_id finds the logged cause.", "error"},
	503: {"ServiceUnavailable", "The service is starting, overloaded, or a dependency is unavailable; nothing was changed. Retry after Retry-After seconds.", "unavailable"},
	504: {"GatewayTimeout", "The request was accepted but its outcome is not known yet; retry with the same Idempotency-Key.", "timeout"},
}

var echoParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// oaPath turns Echo's /wallets/:wallet_id into /wallets/{wallet_id}.
func oaPath(p string) string { return echoParam.ReplaceAllString(p, "{$1}") }

// Build describes routes. version is the interface version (info.version).
// Console routes (AuthConsole, or tagged console) go to a document of their own (Document.ConsoleJSON):
// HTML pages and forms for a browser are no interface a client is generated from.
func Build(routes []Route, version string) (*Document, error) {
	var ops operationsFile
	if err := yaml.Unmarshal(operationsYAML, &ops); err != nil {
		return nil, fmt.Errorf("openapi: operations.yaml: %w", err)
	}
	comps := map[string]any{}
	if err := yaml.Unmarshal(componentsYAML, &comps); err != nil {
		return nil, fmt.Errorf("openapi: components.yaml: %w", err)
	}
	schemas, _ := comps["schemas"].(map[string]any)
	params, _ := comps["parameters"].(map[string]any)
	d := &Document{}
	problem := func(f string, a ...any) { d.Problems = append(d.Problems, fmt.Sprintf(f, a...)) }

	byRoute := bindRoutes(ops, problem)
	served := map[string]bool{}
	apiPaths, consolePaths := map[string]any{}, map[string]any{}
	for _, rt := range routes {
		key := rt.Method + " " + rt.Path
		served[key] = true
		b, ok := byRoute[key]
		if !ok {
			problem("route %s is served but has no entry in api/openapi/operations.yaml", key)
			b = binding{id: strings.ToLower(rt.Method) + echoParam.ReplaceAllString(strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(rt.Path), "$1")}
		}
		op := describe(rt, b.id, b.spec, ok, schemas, params, problem)
		if ok && b.id != b.name {
			op.AliasOf = b.name
		}
		paths := apiPaths
		if rt.Auth == AuthConsole || slices.Contains(b.spec.Tags, consoleTag) {
			paths = consolePaths // its sign-in page and form are open routes
		}
		p := oaPath(rt.Path)
		item, _ := paths[p].(map[string]any)
		if item == nil {
			item = map[string]any{}
			if pp := pathParams(rt.Path, ops.PathParameters, problem); len(pp) > 0 {
				item["parameters"] = pp
			}
			paths[p] = item
		}
		item[strings.ToLower(rt.Method)] = op
		d.Operations++
	}
	for key, b := range byRoute {
		if !served[key] {
			problem("api/openapi/operations.yaml: %s lists %s, which the router does not serve", b.name, key)
		}
	}
	sort.Strings(d.Problems)

	hooks, err := describeWebhooks(schemas, params)
	if err != nil {
		return nil, err
	}
	comps["headers"] = map[string]any{
		"RequestId": map[string]any{"description": "The request's id: the client's X-Request-Id when it is sane, else a new one. Errors repeat it as request_id.",
			"schema": map[string]any{"type": "string"}},
		"RetryAfter": map[string]any{"description": "Seconds to wait before retrying.", "schema": map[string]any{"type": "integer"}},
	}
	comps["responses"] = errorResponseComponents()
	if err := d.encode(version, apiPaths, hooks, comps); err != nil {
		return nil, err
	}
	if d.ConsoleJSON, err = consoleDocument(version, consolePaths, comps); err != nil {
		return nil, err
	}
	return d, nil
}

// binding is the entry (and operation id) that describes a route.
type binding struct {
	name, id string
	spec     opSpec
}

// bindRoutes maps each "METHOD /path" operations.yaml names to its entry.
func bindRoutes(ops operationsFile, problem func(string, ...any)) map[string]binding {
	byRoute := map[string]binding{}
	names := make([]string, 0, len(ops.Operations))
	for name := range ops.Operations {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		spec := ops.Operations[name]
		if len(spec.Routes) == 0 {
			problem("operations.yaml: %s names no route", name)
		}
		for i, r := range spec.Routes {
			key, id, _ := strings.Cut(r, " as ")
			if id == "" {
				id = name
				if i > 0 {
					id = name + strconv.Itoa(i+1)
				}
			}
			if prev, dup := byRoute[key]; dup {
				problem("operations.yaml: route %s is in both %s and %s", key, prev.name, name)
			}
			byRoute[key] = binding{name: name, id: id, spec: spec}
		}
	}
	return byRoute
}

// encode makes the API document in both encodings. The JSON is indented (two
// spaces, keys sorted) so that api/openapi/openapi.json, the committed copy of
// exactly these bytes, diffs line by line.
func (d *Document) encode(version string, paths, hooks, comps map[string]any) error {
	apiComps := map[string]any{"securitySchemes": apiSecuritySchemes}
	for k, v := range comps {
		if k != "securitySchemes" {
			apiComps[k] = v
		}
	}
	doc := document{
		OpenAPI: "3.1.0",
		Info: map[string]any{"title": "paysvc API", "version": version, "summary": "Payments, payouts, wallets, refunds, subscriptions and webhooks.",
			"description": infoDescription},
		JSONSchemaDialect: "https://spec.openapis.org/oas/3.1/dialect/base",
		Servers:           []map[string]any{{"url": "/", "description": "The server that serves this document (sandbox or live: see GET /api/v1)."}},
		Tags:              tags,
		Events:            events,
		Paths:             paths,
		Webhooks:          hooks,
		Components:        apiComps,
	}
	var err error
	if d.JSON, err = json.MarshalIndent(doc, "", "  "); err != nil {
		return fmt.Errorf("openapi: encode JSON: %w", err)
	}
	d.JSON = append(d.JSON, '\n')
	var y bytes.Buffer
	enc := yaml.NewEncoder(&y)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("openapi: encode YAML: %w", err)
	}
	d.YAML = y.Bytes()
	d.JSONETag, d.YAMLETag = etag(d.JSON), etag(d.YAML)
	return nil
}

// errorResponseComponents are the shared error responses (components.responses):
// one per status the API answers with an error, each with the error shape, its
// headers and an example.
func errorResponseComponents() map[string]any {
	responses := map[string]any{}
	for status, e := range errorResponses {
		headers := map[string]any{"X-Request-Id": map[string]any{"$ref": "#/components/headers/RequestId"}}
		if status == 429 || status == 503 {
			headers["Retry-After"] = map[string]any{"$ref": "#/components/headers/RetryAfter"}
		}
		typ := "client_error"
		switch {
		case status == 400:
			typ = "validation_error"
		case status >= 500:
			typ = "server_error"
		}
		example := map[string]any{"type": typ, "detail": e.description, "request_id": "5f0c8c1e-6a86-4b43-9a55-0c8e9d3b1f77",
			"errors": []any{map[string]any{"code": e.code, "detail": e.description, "attr": nil}}}
		responses[e.name] = map[string]any{"description": e.description, "headers": headers,
			"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"},
				"example": example}}}
	}
	return responses
}

func etag(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// describe makes one operation: the route table's part (security, permission,
// idempotency, derived errors) and the hand-written part (spec).
func describe(rt Route, id string, spec opSpec, known bool, schemas, params map[string]any, problem func(string, ...any)) operation {
	op := operation{OperationID: id, Tags: spec.Tags, Summary: spec.Summary, Description: spec.Description,
		Responses: map[string]any{}, Security: security(rt.Auth), Auth: rt.Auth, Permission: rt.Permission,
		Capability: rt.Capability, Idempotent: rt.Idempotent, SandboxOnly: rt.Auth == AuthSandbox, Incomplete: !known}
	if !known {
		op.Tags, op.Summary = []string{"undocumented"}, rt.Method+" "+rt.Path
	}
	if op.Description == "" {
		op.Description = authText[rt.Auth]
	} else {
		op.Description += "\n\n" + authText[rt.Auth]
	}
	if rt.Permission != "" {
		op.Description += " A restricted secret key needs `" + rt.Permission + "`."
	}
	if rt.Capability != "" {
		op.Description += " The path's " + rt.Capability + " is the credential: it opens this one resource, only for an enabled merchant of this server's environment."
	}
	ref := func(kind, name string, in map[string]any) map[string]any {
		if _, ok := in[name]; !ok {
			problem("operations.yaml: %s names %s %q, which components.yaml does not define", id, kind, name)
		}
		return map[string]any{"$ref": "#/components/" + kind + "/" + name}
	}
	for _, q := range spec.Query {
		op.Parameters = append(op.Parameters, ref("parameters", q, params))
	}
	for _, h := range spec.Headers {
		op.Parameters = append(op.Parameters, ref("parameters", h, params))
	}
	if rt.Idempotent {
		op.Parameters = append(op.Parameters, map[string]any{"$ref": "#/components/parameters/IdempotencyKey"})
	}
	if spec.Request != "" {
		media := map[string]any{"schema": ref("schemas", spec.Request, schemas)}
		if ex := example(schemas, spec.Request); ex != nil {
			media["example"] = ex
		}
		op.RequestBody = map[string]any{"required": !spec.RequestOptional, "content": map[string]any{"application/json": media}}
	}
	for status, r := range spec.Responses {
		ct := r.ContentType
		if ct == "" {
			ct = "application/json"
		}
		desc := r.Description
		if desc == "" {
			desc = http.StatusText(status)
		}
		resp := map[string]any{"description": desc,
			"headers": map[string]any{"X-Request-Id": map[string]any{"$ref": "#/components/headers/RequestId"}}}
		if status != http.StatusNotModified {
			media := map[string]any{}
			if r.Schema != "" {
				media["schema"] = ref("schemas", r.Schema, schemas)
				if ex := example(schemas, r.Schema); ex != nil {
					media["example"] = ex
				}
			}
			resp["content"] = map[string]any{ct: media}
		}
		op.Responses[strconv.Itoa(status)] = resp
	}
	if known && len(spec.Responses) == 0 {
		problem("operations.yaml: %s has no success response", id)
	}
	for _, status := range errorStatuses(rt, spec) {
		e, ok := errorResponses[status]
		if !ok {
			problem("operations.yaml: %s lists error %d, which has no shared response", id, status)
			continue
		}
		op.Responses[strconv.Itoa(status)] = map[string]any{"$ref": "#/components/responses/" + e.name}
	}
	return op
}

// errorStatuses are the statuses a route can answer with the error shape: those
// its declaration implies, and those its handler adds (spec.Errors).
func errorStatuses(rt Route, spec opSpec) []int {
	// Everywhere: a query parameter the database cannot store (400), the rate
	// limits (429), an internal error (500), a dependency down (503).
	set := map[int]bool{400: true, 429: true, 500: true, 503: true}
	if strings.Contains(rt.Path, ":") {
		set[404] = true // a path id that names nothing (or that PostgreSQL cannot store)
	}
	switch rt.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		set[413] = true
	}
	switch rt.Auth {
	case AuthSecret, AuthPublicOrSecret, AuthCollection, AuthStatus, AuthPublicKey:
		set[401], set[403] = true, true
	case AuthSandbox:
		set[401], set[403], set[404] = true, true, true // 404 on a live server
	case AuthCallback:
		set[404] = true // a wrong path token
	case AuthConsole:
		set[403] = true // a cross-site form (csrf_refused)
	}
	if rt.Idempotent {
		set[409], set[422] = true, true
	}
	for _, s := range spec.Errors {
		set[s] = true
	}
	out := make([]int, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func pathParams(path string, desc map[string]string, problem func(string, ...any)) []any {
	var out []any
	for _, m := range echoParam.FindAllStringSubmatch(path, -1) {
		d, ok := desc[m[1]]
		if !ok {
			problem("operations.yaml: path parameter %q (%s) has no entry under path_parameters", m[1], path)
		}
		out = append(out, map[string]any{"name": m[1], "in": "path", "required": true, "description": d,
			"schema": map[string]any{"type": "string"}})
	}
	return out
}

// example is a schema's first example, given to the media type so every
// operation shows one.
func example(schemas map[string]any, name string) any {
	s, _ := schemas[name].(map[string]any)
	if ex, ok := s["examples"].([]any); ok && len(ex) > 0 {
		return ex[0]
	}
	return nil
}

func security(a Auth) []map[string][]string {
	secret := map[string][]string{"secretKey": {}}
	public := map[string][]string{"publicKey": {}}
	switch a {
	case AuthSecret, AuthSandbox:
		return []map[string][]string{secret}
	case AuthPublicOrSecret, AuthCollection, AuthStatus:
		return []map[string][]string{secret, public}
	case AuthPublicKey:
		return []map[string][]string{public}
	case AuthConsole:
		return []map[string][]string{{"consoleSession": {}}}
	}
	return []map[string][]string{} // no credential header: open, or a path token
}

var authText = map[Auth]string{
	AuthSecret:         "Authentication: the secret key (`Authorization: Bearer ISSecretKey_...`).",
	AuthPublicOrSecret: "Authentication: the secret key, or the public key alone (header or body `public_key`); an extra valid credential is never a refusal.",
	AuthCollection: "Authentication: the secret key or the public key, not both; or, from a hosted checkout page, the checkout's `signature` with its `checkout_id` in the body " +
		"(x-paysvc-auth; OpenAPI security schemes cannot name a body field).",
	AuthStatus: "Authentication: the secret key, the public key, or the `signature` returned with the collection, in the body " +
		"(x-paysvc-auth; OpenAPI security schemes cannot name a body field).",
	AuthPublicKey: "Authentication: the public key only (header or body `public_key`); a secret key alone is refused.",
	AuthSandbox:   "Sandbox tooling: exists only on a sandbox server (404 on live) and needs the merchant's unrestricted secret key.",
	AuthCallback:  "A payment provider's callback: the secret token in the path is the credential (the provider cannot present a key).",
	AuthNone:      "No credential.",
	AuthConsole: "The merchant console (docs/console.md), for a browser: the session cookie from /console/sign-in is the credential, " +
		"and a form also needs the session's csrf field and a same-origin Origin (403 csrf_refused otherwise, in the error shape). " +
		"Without a live session the answer is 303 to the sign-in page. A page answers HTML; a form answers 303 See Other to the page it " +
		"changed. After sign-in a refusal (a permission the key lacks, an id of another merchant, the API route's own refusal) is an " +
		"HTML page with that status and message. Each action calls the API operation its description names, with that operation's " +
		"permission check and Idempotency-Key.",
}

var apiSecuritySchemes = map[string]any{
	"secretKey": map[string]any{"type": "http", "scheme": "bearer", "bearerFormat": "ISSecretKey_test_... or ISSecretKey_live_...",
		"description": "The merchant's secret key, server to server only. A restricted key holds a list of permissions; each operation names the one it needs in x-paysvc-permission."},
	"publicKey": map[string]any{"type": "apiKey", "in": "header", "name": "X-SERVICE-PUBLIC-API-KEY",
		"description": "The public (publishable) key, ISPubKey_test_... or ISPubKey_live_.... Also accepted as header INTASEND_PUBLIC_API_KEY or X-IntaSend-Public-API-Key, or as the body field public_key."},
}

var tags = []map[string]any{
	{"name": "service", "description": "Health, the interface version and this description."},
	{"name": "wallets", "description": "Settlement and working wallets, statements and transfers between them."},
	{"name": "collections", "description": "M-Pesa STK push, collections, card payments, fee estimates, status and pay requests."},
	{"name": "checkout", "description": "Hosted checkout sessions and their page."},
	{"name": "payment-links", "description": "Reusable payment links and their public pages."},
	{"name": "customers", "description": "The payers of collections (also the subscription customers' records)."},
	{"name": "payouts", "description": "Payment files (send money): initiate, approve, cancel, status; accounts, bank codes, beneficiaries."},
	{"name": "refunds", "description": "Refund requests of collected invoices (chargebacks)."},
	{"name": "subscriptions", "description": "Plans, subscription customers, subscriptions, card setup and sandbox test clocks."},
	{"name": "webhooks", "description": "Webhook endpoints, their deliveries and replays."},
	{"name": "sandbox", "description": "Sandbox-only tools: test money, the mail sink, event streams and sample events."},
	{"name": "callbacks", "description": "Payment providers' callbacks (M-Pesa Daraja), authenticated by the path token."},
	{"name": "hosted-pages", "description": "HTML pages customers open (checkout, payment links, subscription setup and subscribe) and their static files."},
}

// EventSchemas lists the Kafka wire contract's JSON Schemas (docs/events, generated
// from topics/ and checked by its drift test) with what each describes: the
// service's asynchronous interface, beside this one. A test compares it with the
// directory, so a schema added there is listed here.
var EventSchemas = []struct{ File, Topic, Describes string }{
	{"event.schema.json", "paysvc.events.*.v1", "the envelope {id, type, version, occurred_at, payload} of every event"},
	{"collection_event.schema.json", "paysvc.events.collection.v1", "collection_event: an invoice was created or changed state"},
	{"send_money_event.schema.json", "paysvc.events.send_money.v1", "send_money_event: a payment file was created or changed state, or an operator held, released or failed it"},
	{"reversal_event.schema.json", "paysvc.events.reversal.v1", "reversal_event: a refund (chargeback) was created or changed status"},
	{"subscription_event.schema.json", "paysvc.events.subscription.v1", "subscription_event: a subscription was created, activated, billed, failed, changed, cancelled or completed"},
	{"wallet_transfer_event.schema.json", "paysvc.events.wallet_transfer.v1", "wallet_transfer_event: a transfer between the merchant's wallets"},
	{"payout_callback.schema.json", "(HTTP)", "the body POSTed to a payment file's callback_url"},
	{"command.schema.json", "paysvc.commands.v1", "internal: the command envelope"},
	{"reply.schema.json", "paysvc.replies.v1", "internal: the engine's reply to a command"},
	{"wallet_create.schema.json", "paysvc.commands.v1", "internal: payload of wallet.create"},
	{"wallet_deposit.schema.json", "paysvc.commands.v1", "internal: payload of wallet.deposit"},
	{"wallet_transfer_command.schema.json", "paysvc.commands.v1", "internal: payload of wallet.transfer"},
	{"payout_initiate_command.schema.json", "paysvc.commands.v1", "internal: payload of payout.initiate"},
	{"payout_results_command.schema.json", "paysvc.commands.v1", "internal: payload of payout.results"},
	{"payout_operator_command.schema.json", "paysvc.commands.v1", "internal: payload of payout.hold, payout.release and payout.fail (an operator's kill switch of one file)"},
	{"payout_rail_request.schema.json", "paysvc.rails.payout.v1", "internal: a batch of a payment file sent to the payout rail"},
	{"refund_create_command.schema.json", "paysvc.commands.v1", "internal: payload of refund.create"},
	{"refund_cancel_command.schema.json", "paysvc.commands.v1", "internal: payload of refund.cancel"},
	{"refund_take_command.schema.json", "paysvc.commands.v1", "internal: payload of refund.take"},
	{"refund_settle_command.schema.json", "paysvc.commands.v1", "internal: payload of refund.settle"},
	{"subscription_cycle_command.schema.json", "paysvc.commands.v1", "internal: payload of subscription.cycle"},
}

var events = func() []map[string]any {
	out := make([]map[string]any, 0, len(EventSchemas))
	for _, e := range EventSchemas {
		out = append(out, map[string]any{"schema": "docs/events/" + e.File, "topic": e.Topic, "description": e.Describes})
	}
	return out
}()

const infoDescription = `The HTTP interface of paysvc (interface version in info.version; path prefix /api/v1).

Every path is also served with a trailing slash, and no path ever redirects. Request and response
bodies are JSON; unknown request fields (such as public_key) are ignored. Money amounts are decimal
strings with two places ("38.00"); requests may also send them as JSON numbers. Lists are
{count, next, previous, results} with ?page= and ?page_size= (1..500, default 50).

Every error has one shape (components.schemas.Error): detail for older clients, type and
errors[{code, detail, attr}] for newer ones, and request_id (also the X-Request-Id header).

Writes marked x-paysvc-idempotent honour an Idempotency-Key header: a retry with the same key and
body gets the first answer, never a second effect.

What the service POSTs to a merchant's webhooks is under webhooks, one entry per topic, with both
signatures' headers. The merchant console's HTML pages and forms, for a browser, are described apart
(docs/openapi.md).

Who may call each operation: its security requirement and x-paysvc-auth; the permission a
restricted secret key needs: x-paysvc-permission. This document is built by the server from its
own route table (docs/openapi.md).`
