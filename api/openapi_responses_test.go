package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// respChecker validates every answer a test gets against the OpenAPI document the
// server itself serves, with kin-openapi (an implementation of OpenAPI 3.1 and JSON
// Schema 2020-12 written by others, so the document is judged by something that did
// not write it). Undocumented statuses fail too.
type respChecker struct {
	t      *testing.T
	env    *servicetest.Env
	doc    *openapi3.T
	router routers.Router
	// reqRouter finds operations in the document as published, for requests.
	reqRouter routers.Router

	mu sync.Mutex
	// seen is every operation validated, with the statuses it answered.
	seen map[string]map[int]bool
	// dump keeps every answer when PAYSVC_OPENAPI_DUMP names a file to write them
	// to: the material for a new route's schema.
	dump []map[string]any
}

// strictDocument returns the served document with every object schema closed
// (additionalProperties false where it says nothing): the published document
// leaves objects open so fields can be added without breaking generated clients,
// but here a field the handlers emit and the document does not name is drift.
func strictDocument(raw []byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["properties"].(map[string]any); ok {
				if _, set := x["additionalProperties"]; !set {
					x["additionalProperties"] = false
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(doc["components"].(map[string]any)["schemas"])
	return json.Marshal(doc)
}

func newRespChecker(t *testing.T, env *servicetest.Env) *respChecker {
	t.Helper()
	r := env.Do("GET", "/api/v1/openapi.json", nil)
	if r.Status != 200 {
		t.Fatalf("GET /api/v1/openapi.json: %d %s", r.Status, r.Body)
	}
	strict, err := strictDocument(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(strict)
	if err != nil {
		t.Fatalf("load the document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the document is not valid OpenAPI: %v", err)
	}
	// The router matches the request's host against servers: the document's relative
	// "/" is made this server's address for the lookup alone.
	doc.Servers = openapi3.Servers{{URL: env.BaseURL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	// Requests are checked against the document as published (objects open: a
	// client may send what the handlers ignore), answers against the strict one.
	open, err := openapi3.NewLoader().LoadFromData(r.Body)
	if err != nil {
		t.Fatalf("load the document: %v", err)
	}
	open.Servers = openapi3.Servers{{URL: env.BaseURL}}
	openRouter, err := gorillamux.NewRouter(open)
	if err != nil {
		t.Fatal(err)
	}
	c := &respChecker{t: t, env: env, doc: doc, router: router, reqRouter: openRouter, seen: map[string]map[int]bool{}}
	if os.Getenv("PAYSVC_OPENAPI_DUMP") != "" {
		t.Cleanup(func() {
			b, _ := json.MarshalIndent(c.dump, "", "  ")
			_ = os.WriteFile(os.Getenv("PAYSVC_OPENAPI_DUMP"), b, 0o644)
		})
	}
	return c
}

// do sends a request and validates the answer against the document, and an
// accepted request's body against the operation's request schema: a request the
// service accepts and the document calls invalid is drift too.
func (c *respChecker) do(method, path string, body any, headers ...string) servicetest.Response {
	c.t.Helper()
	r := c.env.Do(method, path, body, headers...)
	c.check(method, path, headers, r)
	if r.Status < 400 && body != nil {
		c.checkRequest(method, path, body, headers)
	}
	return r
}

// checkRequest validates an accepted request's body (and parameters) against the
// published document.
func (c *respChecker) checkRequest(method, path string, body any, headers []string) {
	c.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			c.t.Fatal(err)
		}
	}
	lookup, query, _ := strings.Cut(path, "?")
	if len(lookup) > 1 {
		lookup = strings.TrimSuffix(lookup, "/")
	}
	if query != "" {
		lookup += "?" + query
	}
	req, err := http.NewRequest(method, c.env.BaseURL+lookup, bytes.NewReader(raw))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	route, params, err := c.reqRouter.FindRoute(req)
	if err != nil {
		return // reported by check
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		c.t.Errorf("%s %s (operation %s): a request the service accepted does not match the document: %v\nbody: %.400s",
			method, path, route.Operation.OperationID, err, raw)
	}
}

func (c *respChecker) check(method, path string, headers []string, r servicetest.Response) {
	c.t.Helper()
	if os.Getenv("PAYSVC_OPENAPI_DUMP") != "" {
		var v any
		if json.Unmarshal(r.Body, &v) != nil {
			v = fmt.Sprintf("<%d bytes %s>", len(r.Body), r.Header.Get("Content-Type"))
		}
		c.mu.Lock()
		c.dump = append(c.dump, map[string]any{"req": method + " " + path, "status": r.Status, "body": v})
		c.mu.Unlock()
	}
	// Every path is served with and without its trailing slash; the document
	// names it without.
	lookup, query, _ := strings.Cut(path, "?")
	if len(lookup) > 1 {
		lookup = strings.TrimSuffix(lookup, "/")
	}
	if query != "" {
		lookup += "?" + query
	}
	req, err := http.NewRequest(method, c.env.BaseURL+lookup, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		c.t.Errorf("%s %s: no operation in the document: %v", method, path, err)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 r.Status,
		Header:                 r.Header,
		Body:                   io.NopCloser(bytes.NewReader(r.Body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		c.t.Errorf("%s %s (operation %s): answer %d does not match the document: %v\nbody: %.600s",
			method, path, route.Operation.OperationID, r.Status, err, r.Body)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[route.Operation.OperationID] == nil {
		c.seen[route.Operation.OperationID] = map[int]bool{}
	}
	c.seen[route.Operation.OperationID][r.Status] = true
}

// want fails unless r has the status.
func want(t *testing.T, r servicetest.Response, status int, what string) servicetest.Response {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: want %d, got %d %s", what, status, r.Status, r.Body)
	}
	return r
}

// TestOpenAPIResponsesMatchDocument drives real requests of every operation family
// through a whole running service (PostgreSQL, kfake, the engine) and validates
// each answer, successes and refusals alike, against the served document. It then
// reports how many operations it validated, and fails if a family was not reached.
func TestOpenAPIResponsesMatchDocument(t *testing.T) {
	t.Parallel()
	const token = "openapi-callback-token-0123456789abcdef"
	env := servicetest.Start(t, func(c *service.Config) {
		c.API.WebhookAllowPrivate = true
		c.API.DarajaCallbackToken = token
	})
	b := newBundle(t, env, "Documented")
	v := newRespChecker(t, env)
	sec := servicetest.Bearer(b.secret)
	pub := []string{"X-SERVICE-PUBLIC-API-KEY", b.public}
	m := func(r servicetest.Response) map[string]any { return r.Map(t) }

	// Open routes.
	want(t, v.do("GET", "/healthz", nil), 200, "healthz")
	want(t, v.do("GET", "/api/v1/", nil), 200, "interface version")
	j := want(t, v.do("GET", "/api/v1/openapi.json", nil), 200, "openapi.json")
	want(t, v.do("GET", "/api/v1/openapi.yaml", nil), 200, "openapi.yaml")
	want(t, v.do("GET", "/api/v1/openapi.json", nil, "If-None-Match", j.Header.Get("ETag")), 304, "openapi.json revalidated")
	want(t, v.do("GET", "/static/paysvc.css", nil), 200, "static")
	want(t, v.do("GET", "/static/nope.css", nil), 404, "unknown static")
	want(t, v.do("GET", "/api/v1/send-money/bank-codes/ke/", nil), 200, "bank codes")

	// Wallets.
	want(t, v.do("GET", "/api/v1/wallets/", nil, sec...), 200, "list wallets")
	want(t, v.do("GET", "/api/v1/wallets/", nil), 401, "list wallets without a key")
	readOnly := env.Key(b.merchant, "view_wallets")
	want(t, v.do("POST", "/api/v1/wallets/", map[string]any{"currency": "KES", "label": "Denied"}, servicetest.Bearer(readOnly)...), 403, "restricted key")
	w1 := m(want(t, v.do("POST", "/api/v1/wallets/", map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "Ops", "can_disburse": true}, sec...), 201, "create wallet"))["wallet_id"].(string)
	want(t, v.do("POST", "/api/v1/wallets/", map[string]any{"currency": "XXX", "label": "Bad"}, sec...), 400, "create wallet, bad currency")
	want(t, v.do("GET", "/api/v1/wallets/"+w1+"/", nil, sec...), 200, "get wallet")
	want(t, v.do("GET", "/api/v1/wallets/nope/", nil, sec...), 404, "unknown wallet")
	want(t, v.do("POST", "/api/v1/sandbox/wallets/"+b.settlement+"/deposit/", map[string]any{"amount": "50000.00"}, sec...), 200, "sandbox deposit")
	want(t, v.do("POST", "/api/v1/wallets/"+b.settlement+"/intra_transfer/", map[string]any{"wallet_id": w1, "amount": "100.00", "narrative": "float"}, sec...), 200, "intra transfer")
	want(t, v.do("POST", "/api/v1/wallets/"+w1+"/intra_transfer/", map[string]any{"wallet_id": b.settlement, "amount": "900000.00", "narrative": "too much"}, sec...), 400, "intra transfer, insufficient")
	want(t, v.do("GET", "/api/v1/wallets/"+b.settlement+"/transactions/?page_size=1", nil, sec...), 200, "wallet transactions")
	idem := append([]string{"Idempotency-Key", "openapi-wallet"}, sec...)
	want(t, v.do("POST", "/api/v1/wallets/", map[string]any{"currency": "USD", "label": "Dollars"}, idem...), 201, "create wallet with Idempotency-Key")
	want(t, v.do("POST", "/api/v1/wallets/", map[string]any{"currency": "EUR", "label": "Euros"}, idem...), 422, "Idempotency-Key reused")

	// Collections.
	stk := m(want(t, v.do("POST", "/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": "100", "api_ref": "doc-1"}, sec...), 200, "stk push"))
	invoice := stk["invoice"].(map[string]any)["invoice_id"].(string)
	want(t, v.do("POST", "/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": "5"}, pub...), 400, "stk push below the minimum")
	want(t, v.do("POST", "/api/v1/payment/status/", map[string]any{"invoice_id": invoice}, sec...), 200, "status")
	want(t, v.do("POST", "/api/v1/payment/status/", map[string]any{"invoice_id": "nope"}, pub...), 404, "status of nothing")
	want(t, v.do("POST", "/api/v1/payment/status/", map[string]any{"invoice_id": invoice, "signature": "v1.forged.sig"}), 401, "status, forged signature")
	want(t, v.do("POST", "/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "amount": "150", "currency": "KES", "phone_number": "254708374149", "api_ref": "doc-2", "public_key": b.public}), 200, "collection")
	want(t, v.do("POST", "/api/v1/payment/card/", map[string]any{"card_number": "4242424242424242", "expiry": "12/39", "cvv": "123", "amount": "1000", "currency": "KES", "api_ref": "card-doc"}, sec...), 200, "card")
	want(t, v.do("POST", "/api/v1/payment/get_amount_estimate/", map[string]any{"amount": "1000", "currency": "KES", "method": "M-PESA"}, pub...), 200, "amount estimate")
	pr := m(want(t, v.do("POST", "/api/v1/payment/collection/pay-requests/", map[string]any{"first_name": "Jane", "last_name": "Doe", "email": "jane@example.com", "currency": "KES", "amount": 500, "reason": "Invoice 7"}, sec...), 200, "pay request"))
	want(t, v.do("GET", "/api/v1/payment/collection/pay-requests/"+pr["detail"].(map[string]any)["request_id"].(string)+"/", nil, sec...), 200, "get pay request")
	want(t, v.do("GET", "/api/v1/sandbox/mail/", nil, sec...), 200, "sandbox mail")
	// The stream itself is long-lived; its refusals come before it starts.
	want(t, v.do("GET", "/api/v1/events/listen?since=yesterday", nil, sec...), 400, "listen, bad since")

	// Customers.
	cu := m(want(t, v.do("POST", "/api/v1/customers/", map[string]any{"email": "alice@example.com", "first_name": "Alice", "last_name": "Wambui", "city": "Mombasa"}, sec...), 201, "create customer"))
	want(t, v.do("GET", "/api/v1/customers/", nil, sec...), 200, "list customers")
	want(t, v.do("GET", "/api/v1/customers/"+cu["customer_id"].(string)+"/", nil, sec...), 200, "get customer")
	want(t, v.do("GET", "/api/v1/customers/"+cu["customer_id"].(string)+"/transactions/", nil, sec...), 200, "customer transactions")
	want(t, v.do("GET", "/api/v1/customers/nope/", nil, sec...), 404, "unknown customer")

	// Checkout.
	co := m(want(t, v.do("POST", "/api/v1/checkout/", map[string]any{"amount": 250, "currency": "KES", "email": "bob@example.com", "api_ref": "order-9"}, pub...), 200, "checkout"))
	want(t, v.do("POST", "/api/v1/payment/collection/checkout/", map[string]any{"amount": 10, "currency": "KES"}, pub...), 200, "checkout at the spec's path")
	want(t, v.do("POST", "/api/v1/checkout/", map[string]any{"amount": 10, "currency": "KES"}, sec...), 401, "checkout with a secret key")
	want(t, v.do("GET", "/checkout/"+co["id"].(string)+"/", nil), 200, "checkout page")
	want(t, v.do("GET", "/checkout/00000000-0000-0000-0000-000000000000/", nil), 404, "unknown checkout page")
	paid := m(want(t, v.do("POST", "/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "KES", "amount": "250", "phone_number": "254708374149", "api_ref": "doc-3", "checkout_id": co["id"], "signature": co["signature"]}), 200, "collection with the checkout's signature"))
	want(t, v.do("POST", "/api/v1/payment/status/", map[string]any{"invoice_id": paid["invoice"].(map[string]any)["invoice_id"], "signature": paid["signature"]}), 200, "status with the collection's signature")
	// The checkout's customer (by its email) now has a payment: the list's items are validated too.
	var bob string
	for _, c := range m(want(t, v.do("GET", "/api/v1/customers/?page_size=100", nil, sec...), 200, "list customers"))["results"].([]any) {
		if c.(map[string]any)["email"] == "bob@example.com" {
			bob = c.(map[string]any)["customer_id"].(string)
		}
	}
	if bob == "" {
		t.Fatal("the checkout's customer is not listed")
	}
	if n := m(want(t, v.do("GET", "/api/v1/customers/"+bob+"/transactions/", nil, sec...), 200, "customer payments"))["count"]; n == float64(0) {
		t.Error("the checkout's customer lists no payment: the items' schema was not exercised")
	}

	// Payment links.
	link := m(want(t, v.do("POST", "/api/v1/paymentlinks/", map[string]any{"title": "Stall rent", "currency": "KES", "amount": 100, "redirect_url": "https://shop.example.com/thanks"}, sec...), 201, "create link"))
	lid := link["id"].(string)
	want(t, v.do("GET", "/api/v1/paymentlinks/", nil, sec...), 200, "list links")
	want(t, v.do("GET", "/api/v1/paymentlinks/"+lid+"/", nil, sec...), 200, "get link")
	want(t, v.do("PATCH", "/api/v1/paymentlinks/"+lid+"/", map[string]any{"usage_limit": 5}, sec...), 200, "patch link")
	want(t, v.do("PUT", "/api/v1/paymentlinks/"+lid+"/", map[string]any{"title": "Stall rent May", "amount": 120}, sec...), 200, "put link")
	want(t, v.do("GET", "/pay/"+lid+"/", nil), 200, "link page")
	want(t, v.do("GET", "/pay/"+lid+"/qr.png", nil), 200, "link qr")
	want(t, v.do("POST", "/pay/"+lid+"/session/", map[string]any{}), 200, "link session")
	want(t, v.do("POST", "/api/v1/paymentlinks/"+lid+"/deactivate/", nil, sec...), 200, "deactivate link")
	want(t, v.do("POST", "/pay/"+lid+"/session/", map[string]any{}), 400, "session of an inactive link")
	want(t, v.do("GET", "/pay/00000000-0000-0000-0000-000000000000/", nil), 404, "unknown link page")

	// Payouts.
	txn := []map[string]any{{"account": "254708374149", "amount": "100", "name": "Jane Doe", "narrative": "Salary"}}
	f1 := m(want(t, v.do("POST", "/api/v1/send-money/initiate/", map[string]any{"currency": "KES", "provider": "MPESA-B2C", "requires_approval": "YES", "transactions": txn, "batch_reference": "May"}, sec...), 200, "initiate"))
	f2 := m(want(t, v.do("POST", "/api/v1/send-money/initiation/", map[string]any{"currency": "KES", "provider": "MPESA-B2C", "transactions": txn, "callback_url": "https://shop.example.com/payouts"}, sec...), 201, "initiation"))
	want(t, v.do("POST", "/api/v1/send-money/initiate/", map[string]any{"currency": "KES", "provider": "CARRIER-PIGEON", "transactions": txn}, sec...), 400, "initiate, bad provider")
	want(t, v.do("POST", "/api/v1/send-money/approve/", f1, sec...), 200, "approve")
	want(t, v.do("POST", "/api/v1/send-money/approve/", map[string]any{"file_id": f1["file_id"]}, sec...), 400, "approve twice")
	want(t, v.do("POST", "/api/v1/send-money/status/", map[string]any{"tracking_id": f1["tracking_id"]}, sec...), 200, "payout status")
	want(t, v.do("POST", "/api/v1/send-money/cancel/", map[string]any{"file_id": f2["file_id"]}, sec...), 200, "cancel")
	want(t, v.do("POST", "/api/v1/send-money/cancel/", map[string]any{"file_id": f2["file_id"]}, sec...), 400, "cancel twice")
	want(t, v.do("POST", "/api/v1/send-money/validate-account/", map[string]any{"provider": "MPESA-B2C", "account": "254708374149"}, sec...), 200, "validate account")
	want(t, v.do("GET", "/api/v1/send-money/beneficiaries/frequently_used/?provider=MPESA-B2C", nil, sec...), 200, "beneficiaries")
	want(t, v.do("POST", "/api/v1/send-money/mpesa/result/"+token, map[string]any{"nonsense": true}), 400, "B2C result, not a result")
	want(t, v.do("POST", "/api/v1/send-money/mpesa/result/wrong-token", map[string]any{}), 404, "B2C result, wrong token")
	want(t, v.do("POST", "/api/v1/payment/mpesa/callback/"+token, map[string]any{"nonsense": true}), 400, "STK callback, not a callback")
	want(t, v.do("POST", "/api/v1/payment/mpesa/callback/wrong-token/INV1", map[string]any{}), 404, "STK invoice callback, wrong token")
	want(t, v.do("POST", "/api/v1/send-money/mpesa/timeout/wrong-token", map[string]any{}), 404, "B2C timeout, wrong token")
	want(t, v.do("POST", "/api/v1/send-money/mpesa/status/wrong-token", map[string]any{}), 404, "B2C status, wrong token")

	// Refunds.
	collected := b.collected(t, "1000")
	rf := m(want(t, v.do("POST", "/api/v1/chargebacks/", map[string]any{"invoice": collected, "amount": "100", "reason": "Wrong service", "reason_details": "wrong size"}, sec...), 201, "create refund"))
	rid := fmt.Sprint(rf["chargeback_id"])
	want(t, v.do("POST", "/api/v1/chargebacks/", map[string]any{"invoice": collected, "amount": "100000", "reason": "Wrong service"}, sec...), 400, "refund more than collected")
	want(t, v.do("GET", "/api/v1/chargebacks/", nil, sec...), 200, "list refunds")
	want(t, v.do("GET", "/api/v1/chargebacks/"+rid+"/", nil, sec...), 200, "get refund")
	want(t, v.do("POST", "/api/v1/chargebacks/"+rid+"/cancel/", nil, sec...), 200, "cancel refund")
	want(t, v.do("GET", "/api/v1/chargebacks/999999/", nil, sec...), 404, "unknown refund")

	// Subscriptions.
	plan := m(want(t, v.do("POST", "/api/v1/subscriptions/plans/", map[string]any{"name": "Monthly", "amount": "1000", "currency": "KES", "frequency": 1, "frequency_unit": "M", "billing_cycles": 12, "redirect_url": "https://shop.example.com/done"}, sec...), 201, "create plan"))
	pid := plan["plan_id"].(string)
	want(t, v.do("POST", "/api/v1/subscriptions-plans/", map[string]any{"name": "Monthly", "amount": "1100", "currency": "KES", "frequency": 1}, sec...), 200, "upsert plan at the alias")
	want(t, v.do("GET", "/api/v1/subscriptions/plans/", nil, sec...), 200, "list plans")
	want(t, v.do("GET", "/api/v1/subscriptions-plans/", nil, sec...), 200, "list plans at the alias")
	want(t, v.do("GET", "/api/v1/subscriptions/plans/"+pid+"/", nil, sec...), 200, "get plan")
	want(t, v.do("GET", "/api/v1/subscriptions-plans/"+pid+"/", nil, sec...), 200, "get plan at the alias")
	sc := m(want(t, v.do("POST", "/api/v1/subscriptions/customers/", map[string]any{"email": "ann@example.com", "first_name": "Ann", "last_name": "Otieno"}, sec...), 201, "create subscription customer"))
	cid := sc["customer_id"].(string)
	want(t, v.do("POST", "/api/v1/subscriptions-customers/", map[string]any{"email": "ann@example.com", "first_name": "Ann", "last_name": "Otieno", "city": "Kisumu"}, sec...), 200, "upsert customer at the alias")
	want(t, v.do("GET", "/api/v1/subscriptions/customers/", nil, sec...), 200, "list subscription customers")
	want(t, v.do("GET", "/api/v1/subscriptions-customers/", nil, sec...), 200, "list customers at the alias")
	want(t, v.do("GET", "/api/v1/subscriptions/customers/"+cid+"/", nil, sec...), 200, "get subscription customer")
	want(t, v.do("GET", "/api/v1/subscriptions-customers/"+cid+"/", nil, sec...), 200, "get customer at the alias")
	clock := m(want(t, v.do("POST", "/api/v1/subscriptions/test_clocks/", map[string]any{"frozen_time": "2025-01-31T00:00:00+03:00", "name": "doc"}, sec...), 201, "create clock"))
	clk := clock["test_clock_id"].(string)
	want(t, v.do("GET", "/api/v1/subscriptions/test_clocks/"+clk+"/", nil, sec...), 200, "get clock")
	sub := m(want(t, v.do("POST", "/api/v1/subscriptions/subscriptions/", map[string]any{"plan_id": pid, "customer_id": cid, "start_date": "2025-01-31", "test_clock_id": clk, "reference": "gym-ann"}, sec...), 201, "create subscription"))
	sid := sub["subscription_id"].(string)
	setup := sub["setup_url"].(string)
	setup = setup[strings.Index(setup, "/subscriptions/setup/"):]
	want(t, v.do("GET", "/api/v1/subscriptions/subscriptions/", nil, sec...), 200, "list subscriptions")
	want(t, v.do("GET", "/api/v1/subscriptions/subscriptions/"+sid+"/", nil, sec...), 200, "get subscription")
	want(t, v.do("GET", setup, nil), 200, "setup page")
	want(t, v.do("GET", "/api/v1"+setup, nil), 200, "setup info")
	want(t, v.do("POST", "/api/v1"+setup, map[string]any{"card_number": "4000000000000002", "expiry": "12/39", "cvv": "123"}), 402, "setup, declined card")
	want(t, v.do("POST", "/api/v1"+setup, map[string]any{"card_number": "4242424242424242", "expiry": "12/39", "cvv": "123"}), 200, "setup card")
	want(t, v.do("POST", "/api/v1/subscriptions/test_clocks/"+clk+"/advance/", map[string]any{"frozen_time": "2025-03-01T00:00:00+03:00"}, sec...), 200, "advance clock")
	// The clock passed two cycle dates: wait for their charges, so the list's items are validated.
	waittest.Eventually(t, 20*time.Second, func() (bool, string) {
		r := want(t, v.do("GET", "/api/v1/subscriptions/subscriptions/"+sid+"/transactions/", nil, sec...), 200, "subscription payments")
		return m(r)["count"].(float64) > 0, "no cycle was charged after the test clock passed two cycle dates"
	})
	want(t, v.do("PUT", "/api/v1/subscriptions/subscriptions/"+sid+"/", map[string]any{"next_date": "2025-12-01"}, sec...), 200, "update subscription")
	want(t, v.do("POST", "/api/v1/subscriptions/subscriptions/"+sid+"/unsubscribe/", nil, sec...), 200, "unsubscribe")
	want(t, v.do("PUT", "/api/v1/subscriptions/subscriptions/"+sid+"/", map[string]any{}, sec...), 400, "update nothing")
	want(t, v.do("GET", "/subscribe/"+pid+"/", nil), 200, "subscribe page")
	want(t, v.do("POST", "/subscribe/"+pid+"/", map[string]any{"email": "wanjiru@example.com", "first_name": "Wanjiru", "last_name": "Kamau"}), 201, "subscribe")
	want(t, v.do("GET", "/subscribe/PLN_nothing/", nil), 404, "subscribe page of nothing")

	// Webhooks.
	wh := m(want(t, v.do("POST", "/api/v1/webhooks/", map[string]any{"endpoint": "http://127.0.0.1:9/hook", "challenge": "super-secret-1", "collection_event": true}, sec...), 201, "create webhook"))
	wid := wh["id"].(string)
	want(t, v.do("POST", "/api/v1/webhooks/", map[string]any{"endpoint": "http://127.0.0.1:9/hook", "challenge": "short"}, sec...), 400, "create webhook, short challenge")
	want(t, v.do("GET", "/api/v1/webhooks/", nil, sec...), 200, "list webhooks")
	want(t, v.do("GET", "/api/v1/webhooks/"+wid+"/", nil, sec...), 200, "get webhook")
	want(t, v.do("PATCH", "/api/v1/webhooks/"+wid+"/", map[string]any{"send_money_event": true}, sec...), 200, "patch webhook")
	want(t, v.do("POST", "/api/v1/webhooks/"+wid+"/rotate-secret/", map[string]any{"challenge": "another-secret-2"}, sec...), 200, "rotate secret")
	ev := m(want(t, v.do("POST", "/api/v1/events/trigger/", map[string]any{"topic": "collection_event"}, sec...), 201, "trigger event"))
	var events map[string]any
	_ = waittest.Wait(20*time.Second, func() (bool, string) { // no delivery is reported below
		events = m(want(t, v.do("GET", "/api/v1/webhooks/events/?topic=collection_event", nil, sec...), 200, "list deliveries"))
		return events["count"].(float64) > 0, "no delivery"
	})
	if res, _ := events["results"].([]any); len(res) > 0 {
		want(t, v.do("POST", "/api/v1/webhooks/events/"+res[0].(map[string]any)["id"].(string)+"/replay/", nil, sec...), 200, "replay")
	} else {
		t.Errorf("no delivery of the triggered event %v appeared", ev["event_id"])
	}
	want(t, v.do("DELETE", "/api/v1/webhooks/"+wid+"/", nil, sec...), 200, "delete webhook")
	want(t, v.do("GET", "/api/v1/webhooks/"+wid+"/", nil, sec...), 404, "deleted webhook")

	v.report(t)
}

// report logs the coverage of the run and fails when an operation family had no
// answer validated.
func (c *respChecker) report(t *testing.T) {
	t.Helper()
	total := 0
	byTag := map[string]int{}
	for _, item := range c.doc.Paths.Map() {
		for _, op := range item.Operations() {
			total++
			if c.seen[op.OperationID] != nil {
				for _, tag := range op.Tags {
					byTag[tag]++
				}
			}
		}
	}
	answers := 0
	var ops []string
	for id, st := range c.seen {
		answers += len(st)
		var codes []string
		for s := range st {
			codes = append(codes, fmt.Sprint(s))
		}
		sort.Strings(codes)
		ops = append(ops, id+" "+strings.Join(codes, ","))
	}
	sort.Strings(ops)
	t.Logf("openapi: validated %d operations of %d documented (%d distinct operation/status pairs): %s",
		len(c.seen), total, answers, strings.Join(ops, "; "))
	for _, family := range []string{"wallets", "collections", "checkout", "payouts", "refunds", "subscriptions",
		"payment-links", "customers", "webhooks"} {
		if byTag[family] == 0 {
			t.Errorf("openapi: no operation tagged %q had an answer validated", family)
		}
	}
}
