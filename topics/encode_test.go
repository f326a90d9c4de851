package topics_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"paysvc/actors/values/money"
	"paysvc/topics"
)

// EncodeCommandValue must produce the bytes EncodeCommand produces for the
// payload's json.Marshal: the engine and every other consumer read either.
func TestEncodeCommandValue(t *testing.T) {
	payload := topics.WalletTransferCmd{From: "ABC1234567", To: "DEF7654321", Amount: money.MustParse("12.50"),
		Narrative: "rent <&> \"quoted\" \u00e9"}
	raw, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []topics.Command{
		{ID: "c1", Type: topics.CmdWalletTransfer, MerchantID: "M1", ReplyTo: "api-1", IssuedAt: time.Date(2026, 1, 2, 3, 4, 5, 6789, time.UTC)},
		{ID: "c2", Type: topics.CmdWalletTransfer, Version: 1, MerchantID: "M2"},
		{ID: "c3", Type: topics.CmdWalletTransfer, MerchantID: "M3", Environment: topics.Live, Simulated: true, FreshID: true},
	} {
		want := c
		want.Payload = raw
		wb, err := topics.EncodeCommand(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := topics.EncodeCommandValue(c, payload)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, wb) {
			t.Fatalf("EncodeCommandValue:\n got %s\nwant %s", got, wb)
		}
		if d, err := topics.DecodeCommand(got); err != nil || d.ID != c.ID || !bytes.Equal(d.Payload, raw) {
			t.Fatalf("decode: %+v %v", d, err)
		}
	}
}
