package mpesa_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"paysvc/actors/rails/mpesa"
	"paysvc/actors/values/money"
)

// With a CallbackKey each prompt's callback URL ends with its invoice and that
// invoice's MAC, which verifies for that invoice under that key only; the key is
// never printed, and a Daraja error quoting the URL does not carry the MAC.
func TestDarajaPushCallbackMAC(t *testing.T) {
	f := newFake(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	cfg := f.Config("https://example.test/mpesa/callback/tok-0123456789abcdef0123456789abcdef")
	cfg.CallbackKey = key
	d := newDaraja(t, cfg)
	req := mpesa.STKRequest{InvoiceID: "INV1", MerchantID: "M1", Phone: "254708374149", Amount: money.MustParse("10")}
	id, err := d.Push(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := f.Request(id)
	prefix := cfg.CallbackURL + "/INV1/"
	mac := strings.TrimPrefix(got.CallBackURL, prefix)
	if !strings.HasPrefix(got.CallBackURL, prefix) || strings.Contains(mac, "/") {
		t.Fatalf("CallBackURL %q, want %s<MAC>", got.CallBackURL, prefix)
	}
	if !mpesa.ValidCallbackMAC(key, "INV1", mac) {
		t.Fatal("the prompt's MAC does not verify")
	}
	for _, c := range []struct {
		key      []byte
		inv, mac string
	}{{[]byte("another key of thirty-two bytes!"), "INV1", mac}, {key, "INV2", mac}, {key, "INV1", ""},
		{nil, "INV1", mac}, {key, "INV1", mac[:len(mac)-1] + "A"}, {key, "INV1", mac + "A"}} {
		if mpesa.ValidCallbackMAC(c.key, c.inv, c.mac) {
			t.Errorf("MAC %q verifies for invoice %q under key %q", c.mac, c.inv, c.key)
		}
	}
	for _, s := range []string{cfg.String(), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), d.String()} {
		if strings.Contains(s, string(key)) || !strings.Contains(s, "CallbackKey:***") {
			t.Errorf("config printed with its key: %s", s)
		}
	}
	// Daraja refuses and quotes the URL: the error has neither token nor MAC.
	f.FailNextPush(http.StatusBadRequest, "400.002.02", "Bad Request - Invalid CallBackURL "+got.CallBackURL)
	_, err = d.Push(context.Background(), req)
	var ae *mpesa.APIError
	if !errors.As(err, &ae) || strings.Contains(ae.Message, mac) || strings.Contains(ae.Message, "tok-0123456789abcdef") ||
		strings.Contains(err.Error(), mac) {
		t.Fatalf("err %v: want an APIError without the MAC or the token", err)
	}
}
