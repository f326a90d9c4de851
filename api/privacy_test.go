package api_test

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"paysvc/cmd/paysvc/service/servicetest"
)

// The cells of docs/security.md's table "Payer data by principal".
const (
	cellShown    = "shown"
	cellMasked   = "masked"
	cellAbsent   = "absent"
	cellRefused  = "refused"
	cellResolved = "resolved"
)

// The principals, in the table's column order.
const (
	whoNoKey = iota
	whoPublic
	whoSignature
	whoSecretNoView
	whoSecretView
	whoCount
)

var whoNames = [whoCount]string{"no key", "public key", "signature", "secret key without view_collections",
	"secret key with view_collections"}

// payerRow is one row of the table: a field and what each principal gets of it.
// paths are where the field is in the answers (the first present one is read;
// every listed group is checked: the phone is in customer and in invoice).
type payerRow struct {
	name  string     // the row's name in docs/security.md (its first cell up to " (")
	paths [][]string // groups of alternative dotted paths
	cells [whoCount]string
}

var payerTable = []payerRow{
	{"phone", [][]string{{"customer.phone_number", "meta.customer.phone_number", "phone_number"}, {"invoice.account"}},
		[whoCount]string{cellMasked, cellMasked, cellMasked, cellMasked, cellShown}},
	{"email", [][]string{{"customer.email", "meta.customer.email", "email"}},
		[whoCount]string{cellAbsent, cellAbsent, cellAbsent, cellAbsent, cellShown}},
	{"first name", [][]string{{"customer.first_name", "meta.customer.first_name", "first_name"}},
		[whoCount]string{cellAbsent, cellAbsent, cellAbsent, cellAbsent, cellShown}},
	{"last name", [][]string{{"customer.last_name", "meta.customer.last_name", "last_name"}},
		[whoCount]string{cellAbsent, cellAbsent, cellAbsent, cellAbsent, cellShown}},
	{"country", [][]string{{"customer.country", "meta.customer.country", "country"}},
		[whoCount]string{cellAbsent, cellAbsent, cellAbsent, cellAbsent, cellShown}},
	{"zipcode", [][]string{{"customer.zipcode", "meta.customer.zipcode", "zipcode"}},
		[whoCount]string{cellAbsent, cellAbsent, cellAbsent, cellAbsent, cellShown}},
	{"billing address, city, state", nil, // in no answer: only searched for
		[whoCount]string{cellAbsent, cellAbsent, cellAbsent, cellAbsent, cellAbsent}},
	{"the session's comment", [][]string{{"customer_comment", "meta.customer_comment"}},
		[whoCount]string{cellAbsent, cellAbsent, cellAbsent, cellAbsent, cellShown}},
	{"customer id", [][]string{{"customer.customer_id", "meta.customer.customer_id"}},
		[whoCount]string{cellAbsent, cellAbsent, cellAbsent, cellAbsent, cellShown}},
	{"M-Pesa receipt", [][]string{{"invoice.mpesa_reference"}},
		[whoCount]string{cellAbsent, cellMasked, cellMasked, cellAbsent, cellShown}},
	{"card", [][]string{{"card.last4"}},
		[whoCount]string{cellAbsent, cellMasked, cellMasked, cellMasked, cellMasked}},
	{"api_ref", [][]string{{"invoice.api_ref", "api_ref"}},
		[whoCount]string{cellShown, cellShown, cellShown, cellShown, cellShown}},
	{"amount", [][]string{{"invoice.value", "amount"}},
		[whoCount]string{cellShown, cellShown, cellShown, cellShown, cellShown}},
	{"a masked phone sent back", nil,
		[whoCount]string{cellRefused, cellRefused, cellResolved, cellRefused, cellRefused}},
}

// maskOf is what a masked cell of a row must read: a card's last four digits
// (the number is never kept), the hosted page's mask of anything else.
func maskOf(row, v string) string {
	if row == "card" {
		return v[len(v)-4:]
	}
	return payerMask(v)
}

// payerMask is the hosted page's mask of a value (api.mask): at most four
// characters, and at most a third, kept at each end.
func payerMask(v string) string {
	keep := min(4, len(v)/3)
	return v[:keep] + strings.Repeat("*", len(v)-2*keep) + v[len(v)-keep:]
}

// TestPayerDataByPrincipal checks every row of docs/security.md's table "Payer data
// by principal" through HTTP: for each principal, every route it can reach that
// answers payer data (status, STK push, collection on a session the merchant
// described, card, checkout lookup by unique_api_ref, the hosted page, a masked
// phone sent back) is asked about one returning payer, and each field of the
// answer must be shown (the stored value), masked (exactly the page's mask, the
// value nowhere in the body) or absent (null, the value nowhere in the body). The
// table in the document is parsed and must equal the one checked here, and every
// cell must have been checked by at least one answer.
func TestPayerDataByPrincipal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const (
		phone   = "254712345678"
		email   = "wanjiru.payer@example.com"
		first   = "Wanjiru"
		last    = "Kamaunde"
		country = "GH"
		zipcode = "ZP4477"
		address = "12 Moi Avenue"
		city    = "Eldoretville"
		state   = "Uasin Gishu"
		comment = "Leave at the gate"
		pan     = "4242424242424242"
	)
	pub := []string{"X-IntaSend-Public-API-Key", b.public}
	noView := servicetest.Bearer(b.env.Key(b.merchant, "add_collections"))
	withView := servicetest.Bearer(b.env.Key(b.merchant, "view_collections", "add_collections"))
	described := map[string]any{"amount": 20, "currency": "KES", "email": email, "first_name": first, "last_name": last,
		"country": country, "zipcode": zipcode, "address": address, "city": city, "state": state, "comment": comment}
	checkout := func(fields map[string]any) (id, sig string) {
		t.Helper()
		r := b.env.Do("POST", "/api/v1/checkout/", fields, pub...)
		if r.Status != 200 {
			t.Fatalf("create checkout: %d %s", r.Status, r.Body)
		}
		m := r.Map(t)
		return m["id"].(string), m["signature"].(string)
	}
	with := func(extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range described {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}

	// The returning payer: a session the merchant described, paid on its page with
	// the full number, collected.
	c1, sig1 := checkout(with(map[string]any{"api_ref": "priv-order-1"}))
	r := b.env.Do("POST", "/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "KES", "amount": "20.00",
		"api_ref": "priv-order-1", "phone_number": phone, "checkout_id": c1, "signature": sig1})
	if r.Status != 200 {
		t.Fatalf("first payment: %d %s", r.Status, r.Body)
	}
	inv1 := r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
	if got := b.waitInvoice(t, inv1); got["state"] != "COMPLETE" {
		t.Fatalf("first payment: %v", got)
	}
	// What the merchant's unrestricted key reads: the receipt and the customer id.
	r = b.post("/api/v1/payment/status/", map[string]any{"invoice_id": inv1})
	full := r.Map(t)
	receipt, _ := lookup(full, "invoice.mpesa_reference").(string)
	customerID, _ := lookup(full, "meta.customer.customer_id").(string)
	if receipt == "" || customerID == "" {
		t.Fatalf("the merchant's own key lacks the receipt or the customer: %s", r.Body)
	}

	// truths are the payer's values, by row; each answer is checked against those
	// its route carries.
	payer := map[string]string{"phone": phone, "email": email, "first name": first, "last name": last, "country": country,
		"zipcode": zipcode, "the session's comment": comment, "customer id": customerID, "M-Pesa receipt": receipt}
	only := func(names ...string) map[string]string {
		out := map[string]string{}
		for _, n := range names {
			out[n] = payer[n]
		}
		return out
	}
	searched := []string{phone, email, first, last, zipcode, address, city, state, comment, customerID, receipt, pan}

	checked := map[[2]string]bool{}
	// check judges one answer of principal who: every row whose value the route
	// carries (truth) or whose cell is absent (then only searched for).
	check := func(t *testing.T, who int, r servicetest.Response, html bool, truth map[string]string) {
		t.Helper()
		body := string(r.Body)
		var m map[string]any
		if !html {
			_ = json.Unmarshal(r.Body, &m)
		}
		ok := r.Status == 200
		if !ok { // a refusal carries nothing of the payer's
			for _, v := range searched {
				if strings.Contains(body, v) {
					t.Errorf("refusal %d carries %q: %s", r.Status, v, body)
				}
			}
		}
		for _, row := range payerTable {
			cell := row.cells[who]
			if row.name == "a masked phone sent back" {
				continue
			}
			if row.name == "billing address, city, state" {
				for _, v := range []string{address, city, state} {
					if strings.Contains(body, v) {
						t.Errorf("%s: the answer carries %q: %s", row.name, v, body)
					}
				}
				checked[[2]string{row.name, whoNames[who]}] = true
				continue
			}
			want, has := truth[row.name]
			if !has {
				continue
			}
			if !ok {
				// Only an absent cell is what a refusal proves.
				if cell == cellAbsent {
					checked[[2]string{row.name, whoNames[who]}] = true
				}
				continue
			}
			if html {
				switch cell {
				case cellShown:
					if !bodyHas(body, want) {
						t.Errorf("%s: page lacks %q", row.name, want)
					}
				case cellMasked:
					if bodyHas(body, want) || !bodyHas(body, maskOf(row.name, want)) {
						t.Errorf("%s: page should carry %q only, not %q", row.name, maskOf(row.name, want), want)
					}
				case cellAbsent:
					if bodyHas(body, want) {
						t.Errorf("%s: page carries %q", row.name, want)
					}
				}
				checked[[2]string{row.name, whoNames[who]}] = true
				continue
			}
			// Every place of the field the answer has is judged (the card answer
			// has an invoice and no customer); it must have one.
			seen := false
			for _, group := range row.paths {
				got, found := any(nil), false
				for _, p := range group {
					if v, present := lookupOK(m, p); present {
						got, found = v, true
						break
					}
				}
				if !found {
					continue
				}
				seen = true
				switch cell {
				case cellShown:
					if got != want {
						t.Errorf("%s (%s) = %#v, want %q", row.name, group[0], got, want)
					}
				case cellMasked:
					if got != maskOf(row.name, want) {
						t.Errorf("%s (%s) = %#v, want the mask %q", row.name, group[0], got, maskOf(row.name, want))
					}
				case cellAbsent:
					if got != nil {
						t.Errorf("%s (%s) = %#v, want null", row.name, group[0], got)
					}
				}
			}
			if !seen {
				t.Errorf("%s: none of %v in the answer: %s", row.name, row.paths, body)
			}
			if cell != cellShown && bodyHas(body, want) {
				t.Errorf("%s is %s, but the answer carries %q: %s", row.name, cell, want, body)
			}
			checked[[2]string{row.name, whoNames[who]}] = true
		}
	}
	want200 := func(t *testing.T, r servicetest.Response) {
		t.Helper()
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	}
	sessionTruth := func(apiRef, value string, names ...string) map[string]string {
		m := only(names...)
		m["api_ref"], m["amount"] = apiRef, value
		return m
	}
	status := func(body map[string]any, headers ...string) servicetest.Response {
		return b.env.Do("POST", "/api/v1/payment/status/", body, headers...)
	}
	everything := []string{"phone", "email", "first name", "last name", "country", "zipcode", "the session's comment",
		"customer id", "M-Pesa receipt"}
	statusTruth := sessionTruth("priv-order-1", "20.00", everything...)
	pushBody := func(ref string) map[string]any {
		return map[string]any{"phone_number": phone, "amount": "10", "api_ref": ref, "email": email, "first_name": first,
			"last_name": last, "country": country, "zipcode": zipcode}
	}
	pushTruth := func(ref string) map[string]string {
		return sessionTruth(ref, "10.00", "phone", "email", "first name", "last name", "country", "zipcode")
	}
	// A collection on a session that stores the payer's number: the request names
	// none, so the answer's phone is the session's.
	collect := func(ref string, headers ...string) servicetest.Response {
		id, sig := checkout(with(map[string]any{"phone_number": phone}))
		body := map[string]any{"method": "M-PESA", "currency": "KES", "amount": "20.00", "api_ref": ref, "checkout_id": id}
		if len(headers) == 0 {
			body["signature"] = sig
		}
		return b.env.Do("POST", "/api/v1/payment/collection/", body, headers...)
	}
	collectTruth := func(ref string) map[string]string {
		return sessionTruth(ref, "20.00", "phone", "email", "first name", "last name", "country", "zipcode")
	}
	card := func(ref string, headers ...string) servicetest.Response {
		id, sig := checkout(with(map[string]any{"phone_number": phone}))
		body := map[string]any{"card_number": pan, "expiry": "12/39", "cvv": "123", "amount": "20.00", "currency": "KES",
			"api_ref": ref, "checkout_id": id}
		if len(headers) == 0 {
			body["signature"] = sig
		}
		return b.env.Do("POST", "/api/v1/payment/card/", body, headers...)
	}
	cardTruth := func(ref string) map[string]string {
		m := sessionTruth(ref, "20.00", "phone")
		m["card"] = pan
		return m
	}
	// maskedBack sends the page's mask of the returning payer's phone with a session
	// of that payer's email: only its own signature resolves it.
	maskedBack := func(t *testing.T, who int, headers ...string) {
		t.Helper()
		id, sig := checkout(map[string]any{"amount": 20, "currency": "KES", "email": email})
		body := map[string]any{"method": "M-PESA", "currency": "KES", "amount": "20.00", "api_ref": "priv-mask",
			"phone_number": payerMask(phone), "checkout_id": id}
		if who == whoSignature {
			body["signature"] = sig
		}
		r := b.env.Do("POST", "/api/v1/payment/collection/", body, headers...)
		cell := payerTable[len(payerTable)-1].cells[who]
		switch cell {
		case cellRefused:
			if r.Status == 200 || strings.Contains(string(r.Body), phone) {
				t.Fatalf("a masked phone from the %s: %d %s", whoNames[who], r.Status, r.Body)
			}
		case cellResolved:
			want200(t, r)
			check(t, who, r, false, sessionTruth("priv-mask", "20.00", "phone"))
			inv := r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
			st := b.post("/api/v1/payment/status/", map[string]any{"invoice_id": inv})
			if lookup(st.Map(t), "invoice.account") != phone {
				t.Fatalf("the mask should have been resolved to the stored phone: %s", st.Body)
			}
		}
		checked[[2]string{"a masked phone sent back", whoNames[who]}] = true
	}

	// Sub-tests run in order (not parallel): they share the coverage map.
	t.Run("NoKey/Status", func(t *testing.T) {
		r := status(map[string]any{"invoice_id": inv1})
		if r.Status != 401 {
			t.Fatalf("status without a credential: %d %s", r.Status, r.Body)
		}
		check(t, whoNoKey, r, false, only(everything...))
	})
	t.Run("NoKey/CheckoutPage", func(t *testing.T) {
		id, _ := checkout(map[string]any{"amount": 20, "currency": "KES", "email": email, "api_ref": "priv-page",
			"first_name": first, "last_name": last, "country": country, "zipcode": zipcode, "comment": comment})
		r := b.env.Do("GET", "/checkout/"+id+"/", nil)
		want200(t, r)
		truth := only("phone", "email", "first name", "last name", "country", "zipcode", "the session's comment",
			"customer id", "M-Pesa receipt")
		truth["api_ref"], truth["amount"], truth["card"] = "priv-page", "20.00", pan
		check(t, whoNoKey, r, true, truth)
	})
	t.Run("NoKey/MaskedPhoneSentBack", func(t *testing.T) { maskedBack(t, whoNoKey) })

	t.Run("PublicKey/Status", func(t *testing.T) {
		r := status(map[string]any{"invoice_id": inv1}, pub...)
		want200(t, r)
		check(t, whoPublic, r, false, statusTruth)
	})
	// writes are the payments a principal starts, as prefix's subtests, each with
	// its own reference (priv-push-, priv-coll-, priv-card- and ref): an STK push
	// (stk), a collection on a described session and a card payment.
	writes := func(prefix string, who int, ref string, stk bool, headers ...string) {
		if stk {
			t.Run(prefix+"/STKPush", func(t *testing.T) {
				r := b.env.Do("POST", "/api/v1/payment/mpesa-stk-push/", pushBody("priv-push-"+ref), headers...)
				want200(t, r)
				check(t, who, r, false, pushTruth("priv-push-"+ref))
			})
		}
		t.Run(prefix+"/CollectionOnADescribedSession", func(t *testing.T) {
			r := collect("priv-coll-"+ref, headers...)
			want200(t, r)
			check(t, who, r, false, collectTruth("priv-coll-"+ref))
		})
		t.Run(prefix+"/Card", func(t *testing.T) {
			r := card("priv-card-"+ref, headers...)
			want200(t, r)
			check(t, who, r, false, cardTruth("priv-card-"+ref))
		})
	}
	writes("PublicKey", whoPublic, "pub", true, pub...)
	var lookupSig string
	t.Run("PublicKey/CheckoutByUniqueAPIRef", func(t *testing.T) {
		r := b.env.Do("POST", "/api/v1/checkout/", map[string]any{"amount": 20, "currency": "KES", "api_ref": "priv-order-1",
			"unique_api_ref": true}, pub...)
		want200(t, r)
		m := r.Map(t)
		if m["id"] != c1 {
			t.Fatalf("unique_api_ref should return the session %s: %s", c1, r.Body)
		}
		lookupSig, _ = m["signature"].(string)
		check(t, whoPublic, r, false, map[string]string{"email": email, "api_ref": "priv-order-1", "amount": "20.00"})
	})
	t.Run("PublicKey/MaskedPhoneSentBack", func(t *testing.T) { maskedBack(t, whoPublic, pub...) })

	t.Run("Signature/Status", func(t *testing.T) {
		r := status(map[string]any{"invoice_id": inv1, "checkout_id": c1, "signature": sig1})
		want200(t, r)
		check(t, whoSignature, r, false, statusTruth)
	})
	t.Run("Signature/StatusWithTheUniqueAPIRefLookupsSignature", func(t *testing.T) {
		if lookupSig == "" {
			t.Skip("no signature from the lookup")
		}
		r := status(map[string]any{"invoice_id": inv1, "checkout_id": c1, "signature": lookupSig})
		want200(t, r)
		check(t, whoSignature, r, false, statusTruth)
	})
	writes("Signature", whoSignature, "sig", false)
	t.Run("Signature/MaskedPhoneSentBack", func(t *testing.T) { maskedBack(t, whoSignature) })

	t.Run("SecretKeyWithoutViewCollections/Status", func(t *testing.T) {
		r := status(map[string]any{"invoice_id": inv1}, noView...)
		if r.Status != 403 {
			t.Fatalf("status without view_collections: %d %s", r.Status, r.Body)
		}
		check(t, whoSecretNoView, r, false, statusTruth)
	})
	writes("SecretKeyWithoutViewCollections", whoSecretNoView, "nv", true, noView...)
	// The customers API's upsert names an email: a key that may write customers
	// but not read them gets back what it sent, not what the record held.
	upsertTruth := map[string]string{"phone": "+" + phone, "first name": first, "last name": last, "country": country,
		"zipcode": zipcode}
	upsert := func(headers ...string) servicetest.Response {
		return b.env.Do("POST", "/api/v1/customers/", map[string]any{"email": email}, headers...)
	}
	t.Run("SecretKeyWithoutViewCollections/CustomerUpsert", func(t *testing.T) {
		r := upsert(noView...)
		want200(t, r)
		check(t, whoSecretNoView, r, false, upsertTruth)
	})
	t.Run("SecretKeyWithoutViewCollections/MaskedPhoneSentBack", func(t *testing.T) { maskedBack(t, whoSecretNoView, noView...) })

	for _, k := range []struct {
		name    string
		headers []string
	}{{"Unrestricted", servicetest.Bearer(b.secret)}, {"Restricted", withView}} {
		t.Run("SecretKeyWithViewCollections/"+k.name+"/Status", func(t *testing.T) {
			r := status(map[string]any{"invoice_id": inv1}, k.headers...)
			want200(t, r)
			check(t, whoSecretView, r, false, statusTruth)
		})
		writes("SecretKeyWithViewCollections/"+k.name, whoSecretView, "v", true, k.headers...)
		t.Run("SecretKeyWithViewCollections/"+k.name+"/CustomerUpsert", func(t *testing.T) {
			r := upsert(k.headers...)
			want200(t, r)
			check(t, whoSecretView, r, false, upsertTruth)
		})
		t.Run("SecretKeyWithViewCollections/"+k.name+"/MaskedPhoneSentBack", func(t *testing.T) {
			maskedBack(t, whoSecretView, k.headers...)
		})
	}

	t.Run("EveryCellChecked", func(t *testing.T) {
		for _, row := range payerTable {
			for who := range whoCount {
				if !checked[[2]string{row.name, whoNames[who]}] {
					t.Errorf("no answer checked %q for the %s", row.name, whoNames[who])
				}
			}
		}
	})
	t.Run("DocumentedTableIsTheCheckedOne", func(t *testing.T) {
		doc := documentedPayerTable(t)
		if len(doc) != len(payerTable) {
			t.Errorf("docs/security.md has %d rows, the test %d", len(doc), len(payerTable))
		}
		for i, row := range payerTable {
			if i >= len(doc) {
				break
			}
			if doc[i].name != row.name || doc[i].cells != row.cells {
				t.Errorf("row %d: docs/security.md says %q %v, the test checks %q %v", i, doc[i].name, doc[i].cells, row.name, row.cells)
			}
		}
	})
}

// documentedPayerTable parses the table under "### Payer data by principal" in
// docs/security.md: each row's name (its first cell up to " (", without
// backquotes) and the first word of each principal's cell.
func documentedPayerTable(t *testing.T) []payerRow {
	t.Helper()
	f, err := os.Open("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []payerRow
	in, header := false, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			in = strings.TrimSpace(strings.TrimLeft(line, "#")) == "Payer data by principal"
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			if in && header == 2 && len(rows) > 0 {
				break
			}
			continue
		}
		if header < 2 { // the header and its rule
			header++
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != whoCount+1 {
			t.Fatalf("row with %d cells: %s", len(cells), line)
		}
		name, _, _ := strings.Cut(strings.TrimSpace(cells[0]), " (")
		row := payerRow{name: strings.ReplaceAll(name, "`", "")}
		for i := range whoCount {
			word, _, _ := strings.Cut(strings.TrimSpace(cells[i+1]), " ")
			row.cells[i] = word
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		t.Fatal(`docs/security.md has no table under "Payer data by principal"`)
	}
	return rows
}

// bodyHas reports whether a value is in an answer: as a JSON string or an HTML
// attribute or text for short values (a two-letter country is in many base64
// signatures), anywhere for longer ones.
func bodyHas(body, v string) bool {
	if len(v) >= 6 {
		return strings.Contains(body, v)
	}
	return strings.Contains(body, `"`+v+`"`) || strings.Contains(body, ">"+v+"<")
}

func lookupOK(m map[string]any, path string) (any, bool) {
	var cur any = m
	for _, part := range strings.Split(path, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func lookup(m map[string]any, path string) any {
	v, _ := lookupOK(m, path)
	return v
}
