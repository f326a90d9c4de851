package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// refused checks a 400 whose error names attr.
func refused(t *testing.T, r servicetest.Response, attr, what string) {
	t.Helper()
	if r.Status != 400 {
		t.Fatalf("%s: %d %s, want 400 naming %s", what, r.Status, r.Body, attr)
	}
	if _, _, got := errorBody(t, r); got != attr {
		t.Fatalf("%s: 400 names %q, want %q: %s", what, got, attr, r.Body)
	}
}

func goldPlan(extra map[string]any) map[string]any {
	p := map[string]any{"name": "Gold", "amount": "1500", "currency": "KES", "frequency": 1}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// A plan is upserted by name: the second write answers the same plan_id with the
// new terms; fields it leaves out keep their stored values; plan_url is the hosted
// subscribe page under the configured public root.
func TestPlanUpsert(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.PublicBaseURL = "https://pay.example.com" })
	b := newBundle(t, env, "Plans")
	r := b.post("/api/v1/subscriptions/plans/", goldPlan(map[string]any{"billing_cycles": 24, "reference": "gold-2024",
		"redirect_url": "https://shop.example.com/thanks?x=1", "frequency_unit": "W", "frequency": "2"}))
	if r.Status != 201 {
		t.Fatalf("create plan: %d %s", r.Status, r.Body)
	}
	p := r.Map(t)
	id, _ := p["plan_id"].(string)
	if id == "" || p["name"] != "Gold" || p["amount"] != "1500.00" || p["currency"] != "KES" || p["frequency"] != 2.0 ||
		p["frequency_unit"] != "W" || p["billing_cycles"] != 24.0 || p["reference"] != "gold-2024" ||
		p["redirect_url"] != "https://shop.example.com/thanks?x=1" || p["plan_url"] != "https://pay.example.com/subscribe/"+id+"/" ||
		p["created_at"] == nil || p["updated_at"] == nil {
		t.Fatalf("plan: %s", r.Body)
	}

	// Same name: same plan, new amount; billing_cycles, unit, reference kept.
	r = b.post("/api/v1/subscriptions/plans", goldPlan(map[string]any{"amount": 1750.5, "frequency": 3}))
	if r.Status != 200 {
		t.Fatalf("upsert plan: %d %s", r.Status, r.Body)
	}
	u := r.Map(t)
	if u["plan_id"] != id || u["amount"] != "1750.50" || u["frequency"] != 3.0 || u["billing_cycles"] != 24.0 ||
		u["frequency_unit"] != "W" || u["reference"] != "gold-2024" || u["created_at"] != p["created_at"] || u["updated_at"] == p["updated_at"] {
		t.Fatalf("upsert: %s, first %v", r.Body, p)
	}
	// An identical write changes nothing, not even updated_at; "" clears an optional field.
	if again := b.post("/api/v1/subscriptions/plans/", goldPlan(map[string]any{"amount": "1750.50", "frequency": 3})).Map(t); again["updated_at"] != u["updated_at"] {
		t.Fatalf("an identical upsert moved updated_at: %v -> %v", u["updated_at"], again["updated_at"])
	}
	if cl := b.post("/api/v1/subscriptions/plans/", goldPlan(map[string]any{"reference": "", "redirect_url": nil})).Map(t); cl["reference"] != nil ||
		cl["redirect_url"] != "https://shop.example.com/thanks?x=1" {
		t.Fatalf("clear reference, keep redirect_url: %v", cl)
	}
	got := b.get("/api/v1/subscriptions/plans/" + id + "/")
	if got.Status != 200 || got.Map(t)["plan_id"] != id || got.Map(t)["amount"] != "1500.00" {
		t.Fatalf("get plan: %d %s", got.Status, got.Body)
	}

	// Defaults of a new plan: monthly, 11 cycles, no reference or redirect.
	d := b.post("/api/v1/subscriptions/plans/", map[string]any{"name": "Basic", "amount": "10.5", "currency": "USD", "frequency": 1}).Map(t)
	if d["frequency_unit"] != "M" || d["billing_cycles"] != 11.0 || d["reference"] != nil || d["redirect_url"] != nil || d["plan_id"] == id {
		t.Fatalf("defaults: %v", d)
	}
	// A frequency too long for the stored unit, the unit left out: refused.
	b.post("/api/v1/subscriptions/plans/", map[string]any{"name": "Yearly", "amount": "99", "currency": "EUR", "frequency": 1, "frequency_unit": "Y"})
	refused(t, b.post("/api/v1/subscriptions/plans/", map[string]any{"name": "Yearly", "amount": "99", "currency": "EUR", "frequency": 6}),
		"frequency", "frequency above the stored unit's bound")

	// Idempotency-Key: the same request again is the stored answer.
	key := []string{"Idempotency-Key", "plan-key-1"}
	first := b.post("/api/v1/subscriptions/plans/", map[string]any{"name": "Silver", "amount": "5", "currency": "GBP", "frequency": 1}, key...)
	second := b.post("/api/v1/subscriptions/plans/", map[string]any{"name": "Silver", "amount": "5", "currency": "GBP", "frequency": 1}, key...)
	if first.Status != 201 || second.Status != 201 || second.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(first.Body, second.Body) {
		t.Fatalf("idempotent plan create: %d %d %q", first.Status, second.Status, second.Header.Get("Idempotent-Replayed"))
	}
}

// Every limit of a plan is refused with a 400 naming the field, and nothing is stored.
func TestPlanLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	post := func(extra map[string]any) servicetest.Response {
		return b.post("/api/v1/subscriptions/plans/", goldPlan(extra))
	}
	cases := []struct {
		attr  string
		extra map[string]any
	}{
		{"name", map[string]any{"name": nil}},
		{"name", map[string]any{"name": ""}},
		{"name", map[string]any{"name": strings.Repeat("A", 33)}},
		{"name", map[string]any{"name": "Gold Plan"}},
		{"name", map[string]any{"name": "Gold-1"}},
		{"name", map[string]any{"name": "Gold\u00e9"}},
		{"name", map[string]any{"name": "Go\x00ld"}},
		{"name", map[string]any{"name": 12}},
		{"amount", map[string]any{"amount": nil}},
		{"amount", map[string]any{"amount": "0"}},
		{"amount", map[string]any{"amount": "-5"}},
		{"amount", map[string]any{"amount": "1.005"}},
		{"amount", map[string]any{"amount": "1e3"}},
		{"amount", map[string]any{"amount": "1000000"}},
		{"amount", map[string]any{"amount": "8000", "currency": "USD"}},
		{"currency", map[string]any{"currency": nil}},
		{"currency", map[string]any{"currency": "UGX"}},
		{"currency", map[string]any{"currency": "kes"}},
		{"frequency", map[string]any{"frequency": nil}},
		{"frequency", map[string]any{"frequency": 0}},
		{"frequency", map[string]any{"frequency": -1}},
		{"frequency", map[string]any{"frequency": 1.5}},
		{"frequency", map[string]any{"frequency": "x"}},
		{"frequency", map[string]any{"frequency": 1826, "frequency_unit": "D"}},
		{"frequency", map[string]any{"frequency": 261, "frequency_unit": "W"}},
		{"frequency", map[string]any{"frequency": 61}},
		{"frequency", map[string]any{"frequency": 6, "frequency_unit": "Y"}},
		{"frequency_unit", map[string]any{"frequency_unit": "Q"}},
		{"frequency_unit", map[string]any{"frequency_unit": "m"}},
		{"frequency_unit", map[string]any{"frequency_unit": "MM"}},
		{"billing_cycles", map[string]any{"billing_cycles": 0}},
		{"billing_cycles", map[string]any{"billing_cycles": 1001}},
		{"billing_cycles", map[string]any{"billing_cycles": "many"}},
		{"reference", map[string]any{"reference": strings.Repeat("r", 46)}},
		{"redirect_url", map[string]any{"redirect_url": "ftp://example.com/x"}},
		{"redirect_url", map[string]any{"redirect_url": "javascript:alert(1)"}},
		{"redirect_url", map[string]any{"redirect_url": "/relative/path"}},
		{"redirect_url", map[string]any{"redirect_url": "https://user:pw@example.com/"}},
		{"redirect_url", map[string]any{"redirect_url": "https://example.com/a b"}},
		{"redirect_url", map[string]any{"redirect_url": "https://example.com/" + strings.Repeat("a", 381)}},
	}
	for _, c := range cases {
		refused(t, post(c.extra), c.attr, fmt.Sprintf("%v", c.extra))
	}
	// Bytes no text column can hold are refused by the body reader.
	r := b.env.Do("POST", "/api/v1/subscriptions/plans/", []byte(`{"name":"Gold","amount":"1","currency":"KES","frequency":1,"reference":"a`+"\xff"+`"}`),
		servicetest.Bearer(b.secret)...)
	refused(t, r, "reference", "invalid UTF-8")
	if l := b.get("/api/v1/subscriptions/plans/").Map(t); l["count"] != 0.0 {
		t.Fatalf("refused plans were stored: %v", l)
	}
	// The bounds themselves are accepted.
	for _, ok := range []map[string]any{
		{"name": strings.Repeat("A", 32), "amount": "999999", "frequency": 1825, "frequency_unit": "D", "billing_cycles": 1000,
			"reference": strings.Repeat("r", 45), "redirect_url": "http://example.com/" + strings.Repeat("a", 381)},
		{"name": "Max5Years", "amount": "0.01", "frequency": 5, "frequency_unit": "Y"},
		{"name": "EveryMonth", "amount": "7700", "currency": "USD", "frequency": 60},
	} {
		if r := post(ok); r.Status != 201 {
			t.Fatalf("at the bounds %v: %d %s", ok, r.Status, r.Body)
		}
	}
}

// A plan name is unique per merchant, not across merchants; no merchant sees or
// reads another's plans; lists are newest first and paginated.
func TestPlanIsolationAndPages(t *testing.T) {
	t.Parallel()
	a := setup(t)
	other := newBundle(t, a.env, "Other")
	pa := a.post("/api/v1/subscriptions/plans/", goldPlan(nil))
	pb := other.post("/api/v1/subscriptions/plans/", goldPlan(nil))
	if pa.Status != 201 || pb.Status != 201 || pa.Map(t)["plan_id"] == pb.Map(t)["plan_id"] {
		t.Fatalf("same name for two merchants: %d %s / %d %s", pa.Status, pa.Body, pb.Status, pb.Body)
	}
	idA := pa.Map(t)["plan_id"].(string)
	for _, path := range []string{"/api/v1/subscriptions/plans/" + idA + "/", "/api/v1/subscriptions-plans/" + idA} {
		if r := other.get(path); r.Status != 404 {
			t.Fatalf("another merchant's plan %s: %d %s", path, r.Status, r.Body)
		}
	}
	for _, name := range []string{"P1", "P2", "P3", "P4"} {
		if r := a.post("/api/v1/subscriptions-plans", map[string]any{"name": name, "amount": "1", "currency": "KES", "frequency": 1}); r.Status != 201 {
			t.Fatalf("create %s: %d %s", name, r.Status, r.Body)
		}
	}
	var page struct {
		Count    int              `json:"count"`
		Next     *string          `json:"next"`
		Previous *string          `json:"previous"`
		Results  []map[string]any `json:"results"`
	}
	a.get("/api/v1/subscriptions/plans/?page_size=2").JSON(t, &page)
	if page.Count != 5 || len(page.Results) != 2 || page.Next == nil || page.Previous != nil ||
		page.Results[0]["name"] != "P4" || page.Results[1]["name"] != "P3" {
		t.Fatalf("page 1: %+v", page)
	}
	page.Results, page.Next = nil, nil
	a.get("/api/v1/subscriptions-plans?page=3&page_size=2").JSON(t, &page)
	if page.Count != 5 || len(page.Results) != 1 || page.Next != nil || page.Previous == nil || page.Results[0]["name"] != "Gold" {
		t.Fatalf("page 3: %+v", page)
	}
	other.get("/api/v1/subscriptions/plans/").JSON(t, &page)
	if page.Count != 1 || page.Results[0]["plan_id"] == idA {
		t.Fatalf("other merchant's list: %+v", page)
	}
	refused(t, a.get("/api/v1/subscriptions/plans/?page_size=501"), "page_size", "page_size above the bound")
}

func alice(extra map[string]any) map[string]any {
	c := map[string]any{"email": "Alice@Example.com", "first_name": "Alice", "last_name": "Wanjiru"}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// A customer is upserted by email, matched whatever its case: the same id, the
// email as first given, fields left out kept, "" clearing an optional field.
func TestCustomerUpsert(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.post("/api/v1/subscriptions/customers/", alice(map[string]any{"phone_number": "+254 712 345 678", "reference": "crm-1",
		"address": "1 Moi Avenue", "city": "Nairobi", "state": "Nairobi County", "zipcode": "00100", "country": "ke"}))
	if r.Status != 201 {
		t.Fatalf("create customer: %d %s", r.Status, r.Body)
	}
	c := r.Map(t)
	id, _ := c["customer_id"].(string)
	if id == "" || c["email"] != "Alice@Example.com" || c["first_name"] != "Alice" || c["last_name"] != "Wanjiru" ||
		c["phone_number"] != "+254 712 345 678" || c["reference"] != "crm-1" || c["address"] != "1 Moi Avenue" ||
		c["city"] != "Nairobi" || c["state"] != "Nairobi County" || c["zipcode"] != "00100" || c["country"] != "KE" ||
		c["created_at"] == nil || c["updated_at"] == nil {
		t.Fatalf("customer: %s", r.Body)
	}
	r = b.post("/api/v1/subscriptions-customers", map[string]any{"email": "alice@EXAMPLE.COM", "first_name": "Alicia",
		"last_name": "Wanjiru", "reference": ""})
	if r.Status != 200 {
		t.Fatalf("upsert customer: %d %s", r.Status, r.Body)
	}
	u := r.Map(t)
	if u["customer_id"] != id || u["email"] != "Alice@Example.com" || u["first_name"] != "Alicia" || u["reference"] != nil ||
		u["phone_number"] != "+254 712 345 678" || u["country"] != "KE" || u["created_at"] != c["created_at"] {
		t.Fatalf("upsert: %s", r.Body)
	}
	// The top-level form: names optional, same record.
	r = b.post("/api/v1/customers/", map[string]any{"email": "ALICE@example.com", "city": "Mombasa"})
	if r.Status != 200 || r.Map(t)["customer_id"] != id || r.Map(t)["first_name"] != "Alicia" || r.Map(t)["city"] != "Mombasa" {
		t.Fatalf("top-level upsert: %d %s", r.Status, r.Body)
	}
	for _, path := range []string{"/api/v1/subscriptions/customers/" + id + "/", "/api/v1/subscriptions-customers/" + id, "/api/v1/customers/" + id} {
		if g := b.get(path); g.Status != 200 || g.Map(t)["city"] != "Mombasa" {
			t.Fatalf("get %s: %d %s", path, g.Status, g.Body)
		}
	}
	if l := b.get("/api/v1/customers/").Map(t); l["count"] != 1.0 {
		t.Fatalf("one email, one record: %v", l)
	}
	// Names may be left out of the top-level form but never blanked.
	refused(t, b.post("/api/v1/customers/", map[string]any{"email": "alice@example.com", "first_name": ""}), "first_name", "blank name")
}

// Every limit of a customer is refused with a 400 naming the field, nothing stored.
func TestCustomerLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		attr  string
		extra map[string]any
	}{
		{"email", map[string]any{"email": nil}},
		{"email", map[string]any{"email": ""}},
		{"email", map[string]any{"email": "not-an-email"}},
		{"email", map[string]any{"email": "a b@example.com"}},
		{"email", map[string]any{"email": strings.Repeat("a", 243) + "@example.com"}},
		{"first_name", map[string]any{"first_name": nil}},
		{"first_name", map[string]any{"first_name": ""}},
		{"first_name", map[string]any{"first_name": strings.Repeat("a", 46)}},
		{"first_name", map[string]any{"first_name": "Al!ce"}},
		{"last_name", map[string]any{"last_name": nil}},
		{"last_name", map[string]any{"last_name": "W<script>"}},
		{"last_name", map[string]any{"last_name": "Wan\x00jiru"}},
		{"phone_number", map[string]any{"phone_number": "0712345678"}},
		{"phone_number", map[string]any{"phone_number": "+254-712-345-678-9012"}},
		{"phone_number", map[string]any{"phone_number": "+123456"}},
		{"phone_number", map[string]any{"phone_number": "+1234567890123456"}},
		{"phone_number", map[string]any{"phone_number": "254 712  345"}},
		{"phone_number", map[string]any{"phone_number": "tel:254712345678"}},
		{"reference", map[string]any{"reference": strings.Repeat("r", 46)}},
		{"address", map[string]any{"address": strings.Repeat("a", 51)}},
		{"city", map[string]any{"city": strings.Repeat("c", 101)}},
		{"state", map[string]any{"state": strings.Repeat("s", 101)}},
		{"zipcode", map[string]any{"zipcode": strings.Repeat("1", 11)}},
		{"zipcode", map[string]any{"zipcode": "00100;"}},
		{"country", map[string]any{"country": "KEN"}},
		{"country", map[string]any{"country": "K"}},
		{"country", map[string]any{"country": "ZZ"}},
		{"country", map[string]any{"country": "1E"}},
		{"zipcode", map[string]any{"country": "US"}},
		{"zipcode", map[string]any{"country": "ca", "zipcode": ""}},
		{"zipcode", map[string]any{"country": "GB", "zipcode": nil}},
	}
	for _, c := range cases {
		refused(t, b.post("/api/v1/subscriptions/customers/", alice(c.extra)), c.attr, fmt.Sprintf("%v", c.extra))
	}
	r := b.env.Do("POST", "/api/v1/subscriptions/customers/", []byte(`{"email":"a@b.co","first_name":"A","last_name":"B","city":"`+"\xc3"+`"}`),
		servicetest.Bearer(b.secret)...)
	refused(t, r, "city", "invalid UTF-8")
	if l := b.get("/api/v1/subscriptions/customers/").Map(t); l["count"] != 0.0 {
		t.Fatalf("refused customers were stored: %v", l)
	}
	// The bounds are accepted.
	max := alice(map[string]any{"email": strings.Repeat("a", 242) + "@example.com", "first_name": strings.Repeat("a", 45),
		"last_name": "O Brien-Smith_2", "phone_number": "+1 234 567 890 12345", "reference": strings.Repeat("r", 45),
		"address": strings.Repeat("a", 50), "city": strings.Repeat("c", 100), "state": strings.Repeat("s", 100),
		"zipcode": "SW1A 1AA-X", "country": "gb"})
	if r := b.post("/api/v1/subscriptions/customers/", max); r.Status != 201 {
		t.Fatalf("at the bounds: %d %s", r.Status, r.Body)
	}
	// The zipcode rule holds on the stored record: a GB customer keeps needing one;
	// moving the customer to KE lets it go.
	refused(t, b.post("/api/v1/customers", map[string]any{"email": max["email"], "zipcode": ""}), "zipcode", "clearing a GB zipcode")
	if r := b.post("/api/v1/customers", map[string]any{"email": max["email"], "zipcode": "", "country": "KE"}); r.Status != 200 ||
		r.Map(t)["zipcode"] != nil || r.Map(t)["country"] != "KE" {
		t.Fatalf("KE without zipcode: %d %s", r.Status, r.Body)
	}
	if r := b.post("/api/v1/customers", map[string]any{"email": "us@example.com", "country": "US", "zipcode": "94103"}); r.Status != 201 {
		t.Fatalf("US with zipcode: %d %s", r.Status, r.Body)
	}
}

// The Python SDK's calls, as docs/compat.md records them: Bearer secret plus the public
// key header on every call, paths without the trailing slash, and customers.create()
// with an empty body, which is a 400 naming email.
func TestCustomersPythonSDKCalls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	py := append(servicetest.Bearer(b.secret), "INTASEND_PUBLIC_API_KEY", b.public)
	do := func(method, path string, body any) servicetest.Response { return b.env.Do(method, path, body, py...) }

	for _, empty := range []any{nil, "", "{}"} {
		refused(t, do("POST", "/api/v1/customers", empty), "email", fmt.Sprintf("customers.create() with body %q", empty))
	}
	r := do("POST", "/api/v1/customers", map[string]any{"email": "payer@example.com", "first_name": "Pat", "phone_number": "254708374149"})
	if r.Status != 201 {
		t.Fatalf("customers.create(email=...): %d %s", r.Status, r.Body)
	}
	id := r.Map(t)["customer_id"].(string)
	for _, path := range []string{"/api/v1/customers", "/api/v1/customers/", "/api/v1/customers/" + id, "/api/v1/customers/" + id + "/",
		"/api/v1/customers/" + id + "/transactions", "/api/v1/customers/" + id + "/transactions/"} {
		r := do("GET", path, nil)
		if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	if l := do("GET", "/api/v1/customers", nil).Map(t); l["count"] != 1.0 || l["next"] != nil || l["previous"] != nil {
		t.Fatalf("customers list: %v", l)
	}
	if r := do("GET", "/api/v1/customers/NOSUCHCUSTOMER", nil); r.Status != 404 {
		t.Fatalf("unknown customer: %d %s", r.Status, r.Body)
	}
	if r := do("GET", "/api/v1/customers/NOSUCHCUSTOMER/transactions", nil); r.Status != 404 {
		t.Fatalf("unknown customer's transactions: %d %s", r.Status, r.Body)
	}
	// The public key alone reaches none of it.
	pub := []string{"INTASEND_PUBLIC_API_KEY", b.public}
	if r := b.env.Do("GET", "/api/v1/customers", nil, pub...); r.Status != 401 && r.Status != 403 {
		t.Fatalf("public key lists customers: %d %s", r.Status, r.Body)
	}
}

// A customer's transactions are the merchant's payments made with the customer's
// email, in any case, newest first, as Payment sessions; another merchant's
// customers and payments never show.
func TestCustomerTransactionsAndIsolation(t *testing.T) {
	t.Parallel()
	a := setup(t)
	other := newBundle(t, a.env, "Other")
	collect := func(b *bundle, email, ref string) string {
		t.Helper()
		r := b.post("/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "amount": "100", "currency": "KES",
			"phone_number": "254708374149", "api_ref": ref, "email": email})
		if r.Status != 200 {
			t.Fatalf("collection: %d %s", r.Status, r.Body)
		}
		return r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
	}
	first := collect(a, "buyer@example.com", "one")
	second := collect(a, "BUYER@example.com", "two")
	collect(a, "someone-else@example.com", "three")
	collect(other, "buyer@example.com", "theirs")

	c := a.post("/api/v1/customers/", map[string]any{"email": "Buyer@Example.com"}).Map(t)
	id := c["customer_id"].(string)
	var page struct {
		Count    int              `json:"count"`
		Next     *string          `json:"next"`
		Previous *string          `json:"previous"`
		Results  []map[string]any `json:"results"`
	}
	a.get("/api/v1/customers/"+id+"/transactions/").JSON(t, &page)
	if page.Count != 2 || len(page.Results) != 2 {
		t.Fatalf("transactions: %+v", page)
	}
	inv := page.Results[0]["invoice"].(map[string]any)
	if inv["invoice_id"] != second || inv["api_ref"] != "two" || inv["value"] != "100.00" || page.Results[0]["customer"] == nil ||
		page.Results[0]["id"] == nil || page.Results[1]["invoice"].(map[string]any)["invoice_id"] != first {
		t.Fatalf("newest first, as sessions: %+v", page.Results)
	}
	a.get("/api/v1/customers/"+id+"/transactions?page_size=1&page=2").JSON(t, &page)
	if page.Count != 2 || len(page.Results) != 1 || page.Previous == nil || page.Next != nil ||
		page.Results[0]["invoice"].(map[string]any)["invoice_id"] != first {
		t.Fatalf("page 2: %+v", page)
	}

	// The other merchant: its own record for the same email (its payer made it),
	// none of a's.
	oc := other.post("/api/v1/subscriptions/customers/", alice(map[string]any{"email": "buyer@example.com"}))
	if oc.Status != 200 || oc.Map(t)["customer_id"] == id {
		t.Fatalf("same email, other merchant: %d %s", oc.Status, oc.Body)
	}
	for _, path := range []string{"/api/v1/customers/" + id, "/api/v1/customers/" + id + "/transactions", "/api/v1/subscriptions/customers/" + id,
		"/api/v1/subscriptions-customers/" + id + "/"} {
		if r := other.get(path); r.Status != 404 {
			t.Fatalf("other merchant reads %s: %d %s", path, r.Status, r.Body)
		}
	}
	other.get("/api/v1/customers/"+oc.Map(t)["customer_id"].(string)+"/transactions").JSON(t, &page)
	if page.Count != 1 || page.Results[0]["invoice"].(map[string]any)["api_ref"] != "theirs" {
		t.Fatalf("other merchant's transactions: %+v", page)
	}
	other.get("/api/v1/subscriptions/customers").JSON(t, &page)
	if page.Count != 1 || page.Results[0]["customer_id"] == id {
		t.Fatalf("other merchant's list: %+v", page)
	}
}

// Parallel upserts of one email (in several cases) or one plan name leave exactly
// one record, created by exactly one of them.
func TestConcurrentUpsertsMakeOneRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 8
	send := func(path string, body func(i int) map[string]any) (statuses []int, ids map[string]bool) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		ids = map[string]bool{}
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				enc, _ := json.Marshal(body(i))
				req, _ := http.NewRequest("POST", b.env.BaseURL+path, bytes.NewReader(enc))
				req.Header.Set("Authorization", "Bearer "+b.secret)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				var out map[string]any
				_ = json.NewDecoder(resp.Body).Decode(&out)
				mu.Lock()
				defer mu.Unlock()
				statuses = append(statuses, resp.StatusCode)
				for _, k := range []string{"customer_id", "plan_id"} {
					if v, ok := out[k].(string); ok {
						ids[v] = true
					}
				}
			}()
		}
		wg.Wait()
		return statuses, ids
	}
	check := func(what string, statuses []int, ids map[string]bool, list string) {
		t.Helper()
		created := 0
		for _, s := range statuses {
			switch s {
			case 201:
				created++
			case 200:
			default:
				t.Fatalf("%s: status %d in %v", what, s, statuses)
			}
		}
		if created != 1 || len(ids) != 1 || len(statuses) != n {
			t.Fatalf("%s: statuses %v, ids %v: want one creation and one id", what, statuses, ids)
		}
		if l := b.get(list).Map(t); l["count"] != 1.0 {
			t.Fatalf("%s: %v", what, l)
		}
	}
	cases := []string{"same@example.com", "SAME@example.com", "Same@Example.com", "same@EXAMPLE.com"}
	st, ids := send("/api/v1/subscriptions/customers/", func(i int) map[string]any {
		return map[string]any{"email": cases[i%len(cases)], "first_name": fmt.Sprintf("N%d", i), "last_name": "Same"}
	})
	check("customers", st, ids, "/api/v1/customers/")
	st, ids = send("/api/v1/subscriptions/plans/", func(i int) map[string]any {
		return map[string]any{"name": "Race", "amount": fmt.Sprintf("%d", 10+i), "currency": "KES", "frequency": 1}
	})
	check("plans", st, ids, "/api/v1/subscriptions/plans/")
}

// Restricted keys: subscription routes need the subscription permissions, the
// top-level customers the collection ones.
func TestCustomerAndPlanPermissions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	view := servicetest.Bearer(b.env.Key(b.merchant, "view_subscriptions"))
	forbidden(t, b.env.Do("POST", "/api/v1/subscriptions/plans/", goldPlan(nil), view...), "change_subscriptions", "plan upsert")
	forbidden(t, b.env.Do("POST", "/api/v1/subscriptions-customers", alice(nil), view...), "change_subscriptions", "customer upsert")
	forbidden(t, b.env.Do("GET", "/api/v1/customers", nil, view...), "view_collections", "customers list")
	if r := b.env.Do("GET", "/api/v1/subscriptions/plans", nil, view...); r.Status != 200 {
		t.Fatalf("view_subscriptions lists plans: %d %s", r.Status, r.Body)
	}
	coll := servicetest.Bearer(b.env.Key(b.merchant, "view_collections", "add_collections"))
	if r := b.env.Do("POST", "/api/v1/customers", map[string]any{"email": "x@example.com"}, coll...); r.Status != 201 {
		t.Fatalf("add_collections creates a customer: %d %s", r.Status, r.Body)
	}
	forbidden(t, b.env.Do("GET", "/api/v1/subscriptions/customers", nil, coll...), "view_subscriptions", "subscription customers list")
}
