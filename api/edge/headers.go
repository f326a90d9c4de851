package edge

import "net/http"

// PageCSP allows a hosted page's own script, stylesheet and images and its calls
// to paysvc, nothing else: no inline script or style, no third-party host, no
// framing (against clickjacking a payment button), no <base> or form posting
// elsewhere, and DOM sinks locked to Trusted Types (the script only ever sets
// textContent).
const PageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'"

// PageHeaders are the security headers of every hosted page and static file; the
// console's pages start from them and tighten the policy.
func PageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", PageCSP)
	h.Set("X-Frame-Options", "DENY") // frame-ancestors for browsers that predate it
	h.Set("X-Content-Type-Options", "nosniff")
	// The checkout id is in the page's address: the merchant's site behind "Continue"
	// learns it from the redirect's query, never from a Referer.
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
}
