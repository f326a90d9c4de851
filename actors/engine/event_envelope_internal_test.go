package engine

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"paysvc/topics"
)

// The outbox body is encoded from eventEnvelope in one pass; it must be the bytes
// topics.Event gives for the same event, which is what consumers and the
// published schema know.
func TestEventEnvelopeMatchesTopicsEvent(t *testing.T) {
	at := time.Date(2026, 11, 24, 10, 0, 0, 123456000, time.UTC)
	payload := topics.WalletTransfer{ID: "TXN1", FromCurrency: "KES", ToCurrency: "KES", AmountSent: "10.00", AmountReceived: "10.00",
		ExchangeRate: "1.00", Status: "COMPLETE", OriginWallet: "A", DestinationWallet: "B", Narrative: "x <&> \"y\"", CreatedAt: at}
	e := &Engine{}
	c := &topics.Command{ID: "cmd-1", MerchantID: "M1"}
	got := e.event(c, at, topics.WalletTransferEvent, "A", payload)
	want, err := json.Marshal(topics.Event{ID: got.EventID, Type: topics.WalletTransferEvent, Version: 1, OccurredAt: at,
		MerchantID: "M1", Key: "A", Payload: mustJSON(payload)})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Body, want) {
		t.Fatalf("event body:\n got %s\nwant %s", got.Body, want)
	}
}
