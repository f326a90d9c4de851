package mpesa

import (
	"fmt"
	"strings"
	"testing"
)

// A white-box test (it calls the unexported redact), so it stays in package
// mpesa while the fake-backed tests are in mpesa_test.

// Daraja's error texts can quote the callback URL we sent: what reaches an error
// message never carries the callback token.
func TestRedactRemovesTheCallbackToken(t *testing.T) {
	const token = "tok3n-0123456789abcdef0123456789abcdef"
	cfg := DarajaConfig{ConsumerKey: "ck", ConsumerSecret: "cs", Passkey: "pk",
		CallbackURL:  "https://pay.example.com/api/v1/payment/mpesa/callback/" + token,
		B2CResultURL: "https://pay.example.com/api/v1/send-money/mpesa/result/" + token}
	d := &Daraja{cfg: cfg}
	got := d.redact("Bad Request - Invalid CallBackURL " + cfg.CallbackURL + " and ResultURL " + cfg.B2CResultURL)
	if strings.Contains(got, token) {
		t.Fatalf("redacted text still holds the token: %s", got)
	}
	for _, s := range []string{cfg.String(), fmt.Sprintf("%v %#v %+v", cfg, cfg, cfg)} {
		if strings.Contains(s, token) {
			t.Fatalf("printed config holds the token: %s", s)
		}
	}
}
