package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/topics"
)

// dumpDatabase is every row of every table of the test schema as text (row to
// text: bytea columns as hex), plus every bytea column's bytes as text.
func dumpDatabase(t *testing.T, env *servicetest.Env) string {
	t.Helper()
	var tables []string
	if err := env.Schema.DB.Select(&tables, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = $1 AND table_type = 'BASE TABLE' ORDER BY table_name`, env.Schema.Name); err != nil {
		t.Fatal(err)
	}
	if len(tables) < 20 {
		t.Fatalf("only %d tables in schema %s", len(tables), env.Schema.Name)
	}
	var out strings.Builder
	for _, table := range tables {
		var rows []string
		if err := env.Schema.DB.Select(&rows, fmt.Sprintf(`SELECT t::text FROM %q.%q t`, env.Schema.Name, table)); err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		out.WriteString(table + ": " + strings.Join(rows, "\n") + "\n")
	}
	var bytea []struct{ Table, Column string }
	if err := env.Schema.DB.Select(&bytea, `SELECT table_name AS "table", column_name AS "column" FROM information_schema.columns
		WHERE table_schema = $1 AND data_type = 'bytea'`, env.Schema.Name); err != nil {
		t.Fatal(err)
	}
	for _, c := range bytea {
		var vals []string
		if err := env.Schema.DB.Select(&vals, fmt.Sprintf(`SELECT encode(%q, 'escape') FROM %q.%q WHERE %q IS NOT NULL`,
			c.Column, env.Schema.Name, c.Table, c.Column)); err != nil {
			t.Fatalf("dump %s.%s: %v", c.Table, c.Column, err)
		}
		out.WriteString(c.Table + "." + c.Column + ": " + strings.Join(vals, "\n") + "\n")
	}
	return out.String()
}

// No part of a card's number or security code is kept anywhere: not in any table
// (idempotency records, invoices, subscriptions, events, quarantine, ...), not in
// any record of any Kafka topic (the command log, event topics), not in the logs,
// neither as text nor as an unkeyed hash of the body that carried them, after a
// card payment with an Idempotency-Key and a subscription's card setup.
func TestCardDataIsNeverKept(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	b := newBundle(t, env, "Card Data")
	// Distinctive valid (Luhn) numbers and codes that occur nowhere else.
	const payPAN, payCVV, setupPAN, setupCVV = "4917613842572038", "8531", "5398712645039180", "6274"

	payment := func(cvv, pan string) []byte {
		raw, _ := json.Marshal(map[string]any{"card_number": pan, "expiry": "11/37", "cvv": cvv, "amount": "750",
			"currency": "KES", "api_ref": "card-data"})
		return raw
	}
	payBody := payment(payCVV, payPAN)
	key := []string{"Idempotency-Key", "card-data-1"}
	r := b.post("/api/v1/payment/card/", payBody, key...)
	if r.Status != 200 {
		t.Fatalf("card payment: %d %s", r.Status, r.Body)
	}
	inv := r.Map(t)["invoice"].(map[string]any)
	if final := b.waitInvoice(t, inv["id"].(string)); final["state"] != "COMPLETE" {
		t.Fatalf("card payment: %v", final)
	}

	t.Run("FingerprintLeavesTheCardOut", func(t *testing.T) {
		// The same key and request with another security code, or another card
		// with the same last four digits, is the same request: the fingerprint
		// holds neither. Another last four digits, or another amount, is another
		// request (422).
		for _, tc := range []struct {
			what   string
			body   []byte
			status int
		}{
			{"another CVV", payment("1111", payPAN), 200},
			{"another card, same last four", payment(payCVV, "4000056655612038"), 200},
			{"another card", payment(payCVV, "4242424242424242"), 422},
		} {
			r := b.post("/api/v1/payment/card/", tc.body, key...)
			if r.Status != tc.status || (tc.status == 200 && r.Header.Get("Idempotent-Replayed") != "true") {
				t.Errorf("%s with the same Idempotency-Key: %d %s (replayed %q)", tc.what, r.Status, r.Body, r.Header.Get("Idempotent-Replayed"))
			}
		}
		other, _ := json.Marshal(map[string]any{"card_number": payPAN, "expiry": "11/37", "cvv": payCVV, "amount": "751",
			"currency": "KES", "api_ref": "card-data"})
		if r := b.post("/api/v1/payment/card/", other, key...); r.Status != 422 {
			t.Errorf("another amount with the same Idempotency-Key: %d %s", r.Status, r.Body)
		}
	})

	// A subscription's card setup (no key: the setup token is the credential).
	f := subFixture{b: b}
	plan := f.mustPost(t, "/api/v1/subscriptions/plans/", map[string]any{"name": "Data", "amount": "100", "currency": "KES",
		"frequency": 1, "frequency_unit": "M", "billing_cycles": 3}, "plan_id")
	cust := f.mustPost(t, "/api/v1/subscriptions/customers/", map[string]any{"email": "card@example.com", "first_name": "Card",
		"last_name": "Holder"}, "customer_id")
	r = b.post("/api/v1/subscriptions/subscriptions/", map[string]any{"plan_id": plan, "customer_id": cust})
	if r.Status != 201 {
		t.Fatalf("create subscription: %d %s", r.Status, r.Body)
	}
	sub := r.Map(t)
	setupBody, _ := json.Marshal(map[string]any{"card_number": setupPAN, "expiry": "10/36", "cvv": setupCVV})
	r = env.Do("POST", setupPath(t, sub), setupBody)
	if r.Status != 200 || r.Map(t)["status"] != "ACTIVE" {
		t.Fatalf("setup: %d %s", r.Status, r.Body)
	}
	// Its first cycle is charged today, by the scheduler, to the card on file.
	f.waitSub(t, sub["subscription_id"].(string), "first cycle", cycles(1))

	// What must appear nowhere: the numbers, the codes as the bodies carried
	// them, and any plain SHA-256 of a body that held them (as the idempotency
	// record would fingerprint it: method and path, then the body).
	forbidden := map[string]string{"payment PAN": payPAN, "setup PAN": setupPAN}
	for what, cvv := range map[string]string{"payment": payCVV, "setup": setupCVV} {
		forbidden[what+" CVV"] = `"cvv":"` + cvv + `"`
		forbidden[what+" CVV (spaced)"] = `"cvv": "` + cvv + `"`
	}
	for what, body := range map[string][]byte{"payment": payBody, "setup": setupBody} {
		for _, prefix := range []string{"", "POST /api/v1/payment/card\n", "POST /api/v1/payment/card/\n",
			"POST " + strings.TrimSuffix(setupPath(t, sub), "/") + "\n"} {
			sum := sha256.Sum256(append([]byte(prefix), body...))
			forbidden[what+" body hash ("+strings.TrimSpace(prefix)+")"] = hex.EncodeToString(sum[:])
			forbidden[what+" body hash, raw ("+strings.TrimSpace(prefix)+")"] = string(sum[:])
		}
	}
	db := dumpDatabase(t, env)
	if !strings.Contains(db, "card-data-1") || !strings.Contains(db, "2038") {
		t.Fatalf("the dump does not see the idempotency record or the invoice: %d bytes", len(db))
	}
	records := kafkaLog(t, env)
	var log bytes.Buffer
	for _, rec := range records {
		log.Write(rec.Key)
		log.WriteByte('\n')
		log.Write(rec.Value)
		log.WriteByte('\n')
		for _, h := range rec.Headers {
			log.WriteString(h.Key + "=" + string(h.Value) + "\n")
		}
	}
	// The search sees the commands that carried the cards' traces.
	if !strings.Contains(log.String(), topics.CmdSubscriptionActivate) || !strings.Contains(log.String(), "539871******9180") ||
		!strings.Contains(log.String(), `"2038"`) {
		t.Fatalf("the Kafka log (%d records) does not carry the card commands", len(records))
	}
	logs := env.Logs.String()
	for what, s := range forbidden {
		for place, text := range map[string]string{"database": db, "Kafka log": log.String(), "service log": logs} {
			if strings.Contains(text, s) {
				t.Errorf("the %s holds the %s", place, what)
			}
		}
	}
}
