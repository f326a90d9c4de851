package mpesa_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"paysvc/actors/values/money"

	"paysvc/actors/rails/mpesa"
	"paysvc/actors/rails/mpesa/mpesatest"
)

func TestQueryStatusShape(t *testing.T) {
	f := mpesatest.NewFakeDaraja()
	defer f.Close()
	cfg := f.B2CConfig("https://pay.example/cb", "https://pay.example/result/x", "https://pay.example/timeout/x")
	b := newB2C(t, cfg)
	if err := b.QueryStatus(context.Background(), "TXN0000009"); !errors.Is(err, mpesa.ErrInvalidRequest) {
		t.Fatalf("without B2CStatusURL: %v", err)
	}
	cfg.B2CStatusURL = "https://pay.example/status/x"
	b = newB2C(t, cfg)
	if _, err := b.Pay(context.Background(), b2cReq("TXN0000009", "254712345678", "100")); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryStatus(context.Background(), "TXN0000009"); err != nil {
		t.Fatal(err)
	}
	qs := f.StatusQueries()
	if len(qs) != 1 {
		t.Fatalf("queries: %d", len(qs))
	}
	q := qs[0]
	if q.CommandID != mpesa.CommandTransactionStatus || q.OriginatorConversationID != "TXN0000009" || q.Occasion != "TXN0000009" ||
		q.TransactionID != "" || q.PartyA != mpesatest.FakeB2CShortcode || q.IdentifierType != "4" || q.Initiator != mpesatest.FakeB2CInitiator ||
		q.SecurityCredential != mpesatest.FakeB2CSecurityCredential || q.ResultURL != cfg.B2CStatusURL || q.QueueTimeOutURL != cfg.B2CTimeoutURL {
		t.Fatalf("query %+v", q)
	}
	var raw map[string]any
	if err := json.Unmarshal(q.Raw, &raw); err != nil || raw["OriginalConversationID"] != "TXN0000009" {
		t.Fatalf("raw query %s", q.Raw)
	}

	body, err := f.StatusResultBody("TXN0000009", "Completed")
	if err != nil {
		t.Fatal(err)
	}
	r, err := mpesa.ParseStatusResult(body)
	if err != nil {
		t.Fatal(err)
	}
	paid, _ := f.B2CResultBody("TXN0000009", 0)
	b2c, _ := mpesa.ParseB2CResult(paid)
	if r.TransactionID != "TXN0000009" || !r.Final || !r.Paid || r.Receipt != b2c.Receipt || r.PartyName != mpesatest.FakeB2CRecipientName ||
		!r.Amount.Equal(money.MustParse("100")) || r.Status != "Completed" {
		t.Fatalf("completed: %+v", r)
	}
	body, _ = f.StatusResultBody("TXN0000009", "Pending")
	if r, err := mpesa.ParseStatusResult(body); err != nil || r.Final || r.Paid || r.TransactionID != "TXN0000009" {
		t.Fatalf("pending: %+v %v", r, err)
	}
}

func TestParseStatusResultVariants(t *testing.T) {
	env := func(code, params, ref string) string {
		return `{"Result":{"ResultType":0,"ResultCode":` + code + `,"ResultDesc":"d","OriginatorConversationID":"ORIG1",` +
			`"ConversationID":"AG_1"` + params + ref + `}}`
	}
	params := func(kv ...string) string {
		var items []string
		for i := 0; i < len(kv); i += 2 {
			items = append(items, `{"Key":"`+kv[i]+`","Value":`+kv[i+1]+`}`)
		}
		return `,"ResultParameters":{"ResultParameter":[` + strings.Join(items, ",") + `]}`
	}
	occ := `,"ReferenceData":{"ReferenceItem":[{"Key":"Occasion","Value":"TXN1"}]}`
	for name, c := range map[string]struct {
		body              string
		txn               string
		final, paid, fail bool
	}{
		"completed":      {env("0", params("TransactionStatus", `"Completed"`, "ReceiptNo", `"ABC123"`), occ), "TXN1", true, true, false},
		"failed":         {env(`"0"`, params("TransactionStatus", `"Failed"`), occ), "TXN1", true, false, false},
		"declined":       {env("0", params("TransactionStatus", `"Declined"`), occ), "TXN1", true, false, false},
		"pending":        {env("0", params("TransactionStatus", `"Pending"`), occ), "TXN1", false, false, false},
		"query failed":   {env(`"R000002"`, "", occ), "TXN1", false, false, false},
		"no code":        {env(`""`, "", occ), "", false, false, true},
		"not found code": {env("2001", "", ""), "ORIG1", false, false, false},
		"no occasion":    {env("0", params("TransactionStatus", `"Completed"`, "ReceiptNo", `"ABC123"`), ""), "ORIG1", true, true, false},
		"no receipt":     {env("0", params("TransactionStatus", `"Completed"`), occ), "", false, false, true},
		"twice":          {env("0", params("TransactionStatus", `"Completed"`, "TransactionStatus", `"Failed"`), occ), "", false, false, true},
		"no result":      {`{}`, "", false, false, true},
		"trailing data":  {env("0", "", occ) + "x", "", false, false, true},
	} {
		r, err := mpesa.ParseStatusResult([]byte(c.body))
		if c.fail {
			if !errors.Is(err, mpesa.ErrBadStatusResult) {
				t.Errorf("%s: want an error, got %+v %v", name, r, err)
			}
			continue
		}
		if err != nil || r.TransactionID != c.txn || r.Final != c.final || r.Paid != c.paid {
			t.Errorf("%s: %+v %v", name, r, err)
		}
	}
}
