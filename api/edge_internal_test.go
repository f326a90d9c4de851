package api

import (
	"net/http/httptest"
	"testing"
)

// bearer splits the header without allocating its parts; the
// interface's messages for each malformed form must not move.
func TestBearerHeaderForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ header, tok, msg string }{
		{"Bearer ISSecretKey_test_x", "ISSecretKey_test_x", ""},
		{"  bearer ISSecretKey_test_x  ", "ISSecretKey_test_x", ""},
		{"BEARER k", "k", ""},
		{"", "", msgNoCredentials},
		{"   ", "", msgNoCredentials},
		{"Bearer", "", msgNoCredentials},
		{"Bearer ", "", msgNoCredentials},
		{"Basic abc", "", msgNoCredentials},
		{"Token a b", "", msgNoCredentials},
		{"Bearer a b", "", msgSpacesInBearer},
		{"Bearer  a", "", msgSpacesInBearer},
		{"Bearer\ta", "", msgNoCredentials},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", tc.header)
		tok, e := bearer(r)
		switch {
		case tc.msg == "" && (e != nil || tok != tc.tok):
			t.Fatalf("bearer(%q) = %q, %v; want %q", tc.header, tok, e, tc.tok)
		case tc.msg != "" && (e == nil || e.Detail != tc.msg):
			t.Fatalf("bearer(%q) = %q, %v; want refusal %q", tc.header, tok, e, tc.msg)
		}
	}
}
