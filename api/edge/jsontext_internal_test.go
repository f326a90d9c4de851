package edge

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCheckJSONText walks hostile and harmless bodies through the raw-text check:
// what PostgreSQL cannot store (NUL) and what encoding/json would silently replace
// (invalid UTF-8, unpaired surrogates) is refused with the field's path; valid text,
// surrogate pairs included, passes; a body that is not JSON is left to the decoder.
func TestCheckJSONText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		body    string
		path    string // "" means accepted
		problem textProblem
	}{
		{"Plain", `{"email":"a@b.co","amount":"10.00","n":1.5e3,"ok":true,"x":null}`, "", textOK},
		{"Empty", ``, "", textOK},
		{"EmptyObject", ` { } `, "", textOK},
		{"EscapesThatAreFine", `{"a":"\"\\\/\b\f\n\r\t\u0041\u00e9\u2028"}`, "", textOK},
		{"EmojiSurrogatePair", `{"first_name":"\ud83d\ude00"}`, "", textOK},
		{"EmojiRawUTF8", "{\"first_name\":\"😀 مرحبا \u200f\"}", "", textOK},
		{"UpperCaseHexPair", `{"a":"\uD83D\uDE00"}`, "", textOK},
		{"EscapedNUL", `{"email":"a\u0000@b.co"}`, "email", textNUL},
		{"EscapedNULNested", `{"customer":{"email":"\u0000"}}`, "customer.email", textNUL},
		{"EscapedNULInArray", `{"transactions":[{"name":"ok"},{"name":"ok"},{"name":"ok"},{"name":"x\u0000"}]}`, "transactions[3].name", textNUL},
		{"TopLevelArray", `["ok",["\u0000"]]`, "[1][0]", textNUL},
		{"TopLevelString", `"\u0000"`, "body", textNUL},
		{"LoneHighSurrogate", `{"first_name":"\ud800"}`, "first_name", textSurrogate},
		{"HighSurrogateThenText", `{"first_name":"\ud800abc"}`, "first_name", textSurrogate},
		{"HighSurrogateThenHigh", `{"first_name":"\ud800\ud800"}`, "first_name", textSurrogate},
		{"HighSurrogateThenNonSurrogate", `{"first_name":"\ud800\u0041"}`, "first_name", textSurrogate},
		{"HighSurrogateAtEnd", `{"a":"x\udbff"}`, "a", textSurrogate},
		{"LoneLowSurrogate", `{"last_name":"\udc00"}`, "last_name", textSurrogate},
		{"ReversedPair", `{"a":"\ude00\ud83d"}`, "a", textSurrogate},
		{"RawInvalidUTF8", "{\"api_ref\":\"ab\xffcd\"}", "api_ref", textBadUTF8},
		{"RawTruncatedUTF8", "{\"api_ref\":\"\xe2\x82\"}", "api_ref", textBadUTF8},
		{"RawEncodedSurrogate", "{\"api_ref\":\"\xed\xa0\x80\"}", "api_ref", textBadUTF8},
		{"RawOverlongNUL", "{\"api_ref\":\"\xc0\x80\"}", "api_ref", textBadUTF8},
		{"RawNUL", "{\"api_ref\":\"a\x00b\"}", "api_ref", textControl},
		{"RawNewline", "{\"narrative\":\"a\nb\"}", "narrative", textControl},
		{"BadKey", `{"em\u0000ail":"a@b.co"}`, "em\uFFFD", textNUL},
		{"BadNestedKey", `{"customer":{"\ud800":"x"}}`, "customer.\uFFFD", textSurrogate},
		{"BadKeyRawBytes", "{\"a\xff\":1}", "a\uFFFD", textBadUTF8},
		{"SecondFieldBad", `{"a":"fine","b":{"c":[1,2,{"d":"\u0000"}]}}`, "b.c[2].d", textNUL},
		{"NumbersDoNotMatter", `{"amount":1e400,"n":-99999999999999999999999}`, "", textOK},
		{"NotJSON", "\xff\xfe garbage", "", textOK},
		{"TruncatedObject", `{"a":"b`, "", textOK},
		{"BadEscapeIsSyntax", `{"a":"\x"}`, "", textOK},
		{"TrailingJunkIgnored", "{\"a\":\"b\"} \x00\xff", "", textOK},
		{"DeepButFine", strings.Repeat("[", 500) + `"x"` + strings.Repeat("]", 500), "", textOK},
		{"DeepWithNUL", strings.Repeat("[", 3) + `"\u0000"` + strings.Repeat("]", 3), "[0][0][0]", textNUL},
		{"TooDeepIsSyntax", strings.Repeat("[", maxScanDepth+1) + `"\u0000"` + strings.Repeat("]", maxScanDepth+1), "", textOK},
		{"LongKeyIsCut", `{"` + strings.Repeat("k", 100) + `\u0000":1}`, strings.Repeat("k", maxAttrRunes) + "…", textNUL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := checkJSONText([]byte(tc.body))
			if tc.path == "" {
				if got != nil {
					t.Fatalf("refused %q at %q (%s); want accepted", tc.body, got.path, got.problem)
				}
				return
			}
			if got == nil {
				t.Fatalf("accepted %q; want refused at %q", tc.body, tc.path)
			}
			if got.path != tc.path || got.problem != tc.problem {
				t.Fatalf("refused at %q (%s); want %q (%s)", got.path, got.problem, tc.path, tc.problem)
			}
		})
	}
}

// The check accepts a string exactly when encoding/json decodes it to the very
// text sent: no NUL, no U+FFFD put in place of bytes or escapes it could not read.
// Tried on every pair of a set of pieces, each with the text it stands for.
func TestCheckJSONTextAcceptsOnlyFaithfulText(t *testing.T) {
	t.Parallel()
	type piece struct {
		raw, text string
		faithful  bool
	}
	pieces := []piece{
		{"a", "a", true}, {"é", "é", true}, {"😀", "😀", true}, {"\\u00e9", "é", true}, {"\\ud83d\\ude00", "😀", true},
		{"\\n", "\n", true}, {"\u200f", "\u200f", true}, {"\\\"", "\"", true}, {"\ufffd", "\ufffd", true},
		{"\\u0000", "", false}, {"\\ud800", "", false}, {"\\udc00", "", false}, {"\xff", "", false}, {"\xed\xa0\x80", "", false},
	}
	for _, a := range pieces {
		for _, b := range pieces {
			body := `{"f":"` + a.raw + b.raw + `"}`
			accepted := checkJSONText([]byte(body)) == nil
			want, text := a.faithful && b.faithful, a.text+b.text
			if a.raw == `\ud800` && b.raw == `\udc00` {
				want, text = true, "\U00010000" // the two halves make one pair
			}
			if accepted != want {
				t.Errorf("%q: accepted %v, want %v", body, accepted, want)
				continue
			}
			var v map[string]string
			if err := json.Unmarshal([]byte(body), &v); err != nil {
				t.Fatalf("%q: the decoder refuses it: %v", body, err)
			}
			if accepted && v["f"] != text {
				t.Errorf("accepted %q, which decodes to %q, not %q", body, v["f"], text)
			}
		}
	}
}

// FuzzCheckJSONText (make fuzz): whatever the body, the check does not panic, and a
// body it accepts decodes (when encoding/json decodes it at all) to text with no NUL
// and no U+FFFD that the client did not send itself.
func FuzzCheckJSONText(f *testing.F) {
	for _, s := range []string{`{"email":"a\u0000@b.co"}`, `{"a":["\ud800",{"b":"\ud83d\ude00"}]}`, "{\"a\":\"\xff\"}",
		`{"transactions":[{"name":"x"}]}`, `"\ufffd"`, `[[[]]]`, `{"a\u0000":1}`, `{"a":"\\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if checkJSONText(raw) != nil {
			return
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return
		}
		sentFFFD := strings.Contains(string(raw), "\ufffd") || strings.Contains(strings.ToLower(string(raw)), `\ufffd`)
		var walk func(any)
		walk = func(x any) {
			check := func(s string) {
				if strings.ContainsRune(s, 0) || (!sentFFFD && strings.ContainsRune(s, '\uFFFD')) {
					t.Fatalf("accepted %q, which decodes to %q", raw, s)
				}
			}
			switch x := x.(type) {
			case string:
				check(x)
			case []any:
				for _, e := range x {
					walk(e)
				}
			case map[string]any:
				for k, e := range x {
					check(k)
					walk(e)
				}
			}
		}
		walk(v)
	})
}
