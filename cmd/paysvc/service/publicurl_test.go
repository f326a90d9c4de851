package service

import "testing"

func TestDefaultPublicBaseURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080",
		"0.0.0.0:8080":   "http://localhost:8080",
		"[::]:8080":      "http://localhost:8080",
		"[::1]:9000":     "http://[::1]:9000",
		"pay.example:80": "http://pay.example:80",
	} {
		if got := defaultPublicBaseURL(addr); got != want {
			t.Errorf("defaultPublicBaseURL(%q) = %q, want %q", addr, got, want)
		}
	}
}
