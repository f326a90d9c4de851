package mpesa

import "time"

// PrimeB2CToken gives b a token valid for an hour, so that a test reaches the
// B2C call itself without a token fetch. The fake-backed tests are an external
// package (mpesa_test: package mpesatest imports mpesa), so this reaches in
// for them.
func PrimeB2CToken(b *B2C, token string) {
	b.d.token, b.d.expiry = token, b.d.cfg.Now().Add(time.Hour)
}
