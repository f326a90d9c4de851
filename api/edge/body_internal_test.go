package edge

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// ParseBody decodes the common case with json.Unmarshal and falls back to the
// Decoder: what it accepts, refuses and returns must stay exactly the
// Decoder's, which reads only the first JSON value of the body.
func TestParseBodyKeepsDecoderSemantics(t *testing.T) {
	t.Parallel()
	decoderOnly := func(raw []byte) (Body, bool) {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			return Body{}, true
		}
		var b Body
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
		got, gerr := ParseBody([]byte(in))
		want, ok := decoderOnly([]byte(in))
		if (gerr == nil) != ok {
			t.Fatalf("ParseBody(%q): err %v, Decoder ok %v", in, gerr, ok)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("ParseBody(%q) = %v, Decoder %v", in, got, want)
		}
	}
}
