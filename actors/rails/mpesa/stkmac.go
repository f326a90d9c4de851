package mpesa

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
)

// CallbackMACSecret names the service secret (storage.ServiceSecret) that keys
// the per-prompt proof of STK callbacks. It lives in the database, not next to
// PAYSVC_DARAJA_CALLBACK_TOKEN: whoever learns the token (a proxy log, a leaked
// environment) still cannot prove an outcome.
const CallbackMACSecret = "stk_callback_mac"

// callbackMACLen is the length of a MAC in a callback URL: 24 bytes (192 bits)
// of HMAC-SHA256, base64url without padding.
const callbackMACLen = 32

// CallbackMAC is the proof a prompt's callback URL carries after its invoice id
// (CallbackURL/<InvoiceID>/<MAC>): HMAC-SHA256 under the service's secret over
// the invoice id. Daraja posts a prompt's outcome to the URL it was given, so a
// callback with the right MAC for the invoice it names comes from the party we
// gave that URL to; anyone else (a forger holding only the path token) cannot
// compute it. It is not logged: it authorises one invoice's outcomes.
func CallbackMAC(key []byte, invoiceID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("paysvc stk callback v1\x00"))
	m.Write([]byte(invoiceID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:24])
}

// ValidCallbackMAC reports whether mac proves a callback for invoiceID, in
// constant time. No key, or no MAC, is never valid.
func ValidCallbackMAC(key []byte, invoiceID, mac string) bool {
	if len(key) == 0 || invoiceID == "" || len(mac) != callbackMACLen {
		return false
	}
	return hmac.Equal([]byte(CallbackMAC(key, invoiceID)), []byte(mac))
}
