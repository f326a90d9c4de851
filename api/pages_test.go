package api_test

import (
	"regexp"
	"strings"
	"testing"

	"paysvc/cmd/paysvc/service/servicetest"
)

// The hosted pages' security surface, without a browser: the headers that keep the
// page from being framed or loading anything but paysvc, no inline script or style
// (the CSP would block it), and the merchant's name escaped.
func TestHostedPageHeaders(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	b := newBundle(t, env, `Duka <script>alert(1)</script> & Sons`)
	r := env.Do("POST", "/api/v1/checkout/", map[string]any{"amount": 75, "currency": "KES"}, "X-SERVICE-PUBLIC-API-KEY", b.public)
	if r.Status != 200 {
		t.Fatalf("create checkout: %d %s", r.Status, r.Body)
	}
	id := r.Map(t)["id"].(string)
	r = env.Do("GET", "/checkout/"+id+"/", nil)
	page := string(r.Body)
	if r.Status != 200 {
		t.Fatalf("page: %d %s", r.Status, page)
	}

	t.Run("SecurityHeaders", func(t *testing.T) {
		csp := r.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
			"frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("CSP %q lacks %q", csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") || strings.Contains(csp, "http") {
			t.Errorf("CSP allows too much: %q", csp)
		}
		for h, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
			"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"} {
			if got := r.Header.Get(h); got != want {
				t.Errorf("%s = %q, want %q", h, got, want)
			}
		}
	})

	t.Run("NoInlineScriptOrStyleNoOtherHost", func(t *testing.T) {
		if m := regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]+</script>|<script>|\sstyle=|<style|\son[a-z]+=`).FindString(page); m != "" {
			t.Errorf("page has inline code the CSP would block: %q", m)
		}
		if m := regexp.MustCompile(`(?:src|href)="(?:https?:)?//[^"]*"`).FindString(page); m != "" {
			t.Errorf("page refers to another host: %s", m)
		}
		if !strings.Contains(page, `<html lang="en">`) {
			t.Error("page has no lang attribute")
		}
	})

	t.Run("MerchantNameEscaped", func(t *testing.T) {
		if strings.Contains(page, "<script>alert(1)") || !strings.Contains(page, "Duka &lt;script&gt;alert(1)&lt;/script&gt; &amp; Sons") {
			t.Errorf("merchant name not shown escaped:\n%s", page)
		}
	})

	t.Run("StaticFiles", func(t *testing.T) {
		for _, ref := range regexp.MustCompile(`(?:src|href)="(/static/[^"]+)"`).FindAllStringSubmatch(page, -1) {
			path := strings.ReplaceAll(ref[1], "&amp;", "&")
			s := env.Do("GET", path, nil)
			if s.Status != 200 || s.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(s.Header.Get("Cache-Control"), "immutable") {
				t.Errorf("%s: %d %v", path, s.Status, s.Header)
			}
		}
		if s := env.Do("GET", "/static/paysvc.css", nil); s.Status != 200 || s.Header.Get("Content-Type") != "text/css; charset=utf-8" ||
			strings.Contains(s.Header.Get("Cache-Control"), "immutable") {
			t.Errorf("unversioned stylesheet: %d %v", s.Status, s.Header)
		}
		for _, p := range []string{"/static/nope.js", "/static/..%2fpages.go", "/static/../checkout.html"} {
			if s := env.Do("GET", p, nil); s.Status != 404 {
				t.Errorf("%s: %d %s", p, s.Status, s.Body)
			}
		}
	})
}
