package rails_test

import (
	"bytes"
	"testing"

	"paysvc/actors/rails"
	"paysvc/actors/rails/mpesa"
	"paysvc/actors/values/money"
	"paysvc/topics"
)

// The record a rail outcome is produced as is the command ResultCommand builds:
// same envelope, same payload bytes (encoded once inside the envelope instead of
// apart), and the engine decodes it the same way.
func TestResultRecordIsTheResultCommand(t *testing.T) {
	for _, r := range []mpesa.Result{
		{InvoiceID: "INV00001", MerchantID: "M1", Stage: mpesa.StageFinal, Code: 0, Description: "The service request is processed successfully.",
			Receipt: "SIM<&>0001", CheckoutRequestID: "ws_CO_1", Amount: money.MustParse("100.00")},
		{InvoiceID: "INV00002", MerchantID: "M2", Stage: "ACCEPTED", CheckoutRequestID: "ws_CO_2"},
		{InvoiceID: "INV00003", MerchantID: "M3", Stage: mpesa.StageFinal, Code: 1032, Description: "Request cancelled by user"},
	} {
		o := rails.Origin{Environment: "sandbox", Simulated: r.InvoiceID != "INV00002"}
		want, err := rails.ResultCommand(r, o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := rails.ResultRecord(r, o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := topics.DecodeCommand(b)
		if err != nil {
			t.Fatalf("%s: %v", r.InvoiceID, err)
		}
		if got.ID != want.ID || got.Type != want.Type || got.Version != want.Version || got.MerchantID != want.MerchantID ||
			got.FreshID || got.IssuedAt.IsZero() || !bytes.Equal(got.Payload, want.Payload) ||
			got.Environment != o.Environment || got.Simulated != o.Simulated || want.Environment != o.Environment || want.Simulated != o.Simulated {
			t.Errorf("%s: record %+v (payload %s), want %+v (payload %s)", r.InvoiceID, got, got.Payload, want, want.Payload)
		}
	}
}

// BenchmarkResultRecord compares the record encoded in one pass with the command
// encoded and then encoded again as a record (its payload validated and copied as
// a json.RawMessage).
func BenchmarkResultRecord(b *testing.B) {
	r := mpesa.Result{InvoiceID: "INV00001", MerchantID: "MER3FNQYTUCM", Stage: mpesa.StageFinal,
		Description: "The service request is processed successfully.", Receipt: "SIM6HGOWW7",
		CheckoutRequestID: "ws_CO_26112026192848085031597342", Amount: money.MustParse("100.00")}
	o := rails.Origin{Environment: "sandbox", Simulated: true}
	b.Run("one-pass", func(b *testing.B) {
		for b.Loop() {
			if _, err := rails.ResultRecord(r, o); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("command-then-record", func(b *testing.B) {
		for b.Loop() {
			c, err := rails.ResultCommand(r, o)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := topics.EncodeCommand(c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
