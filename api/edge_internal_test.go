package api

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"testing"
)

// parseBody decodes the common case with json.Unmarshal and falls back to the
// Decoder: what it accepts, refuses and returns must stay exactly the
// Decoder's, which reads only the first JSON value of the body.
func TestParseBodyKeepsDecoderSemantics(t *testing.T) {
	t.Parallel()
	decoderOnly := func(raw []byte) (body, bool) {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			return body{}, true
		}
		var b body
		if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&b); err != nil || b == nil {
			return nil, false
		}
		return b, true
	}
	for _, in := range []string{
		``, `  `, `{}`, ` {"a":1} `, `{"a":"x","b":[1,2],"c":{"d":null}}`, `{"a":1,"a":2}`,
		`{"a":1}{"b":2}`, `{"a":1} trailing`, `{"a":1}]`, `null`, `[]`, `[1]`, `"s"`, `1`, `true`,
		`{`, `{"a":}`, `{"a":1,}`, `{"a":1`, `{"a":1} {`, `nul`, "{\"a\":\"\xff\"}", `{"a":"\u0000"}`,
	} {
		got, gerr := parseBody([]byte(in))
		want, ok := decoderOnly([]byte(in))
		if (gerr == nil) != ok {
			t.Fatalf("parseBody(%q): err %v, Decoder ok %v", in, gerr, ok)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("parseBody(%q) = %v, Decoder %v", in, got, want)
		}
	}
}

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
