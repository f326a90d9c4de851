package money

import (
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// twoPlaces is the only shape String may ever produce.
var twoPlaces = regexp.MustCompile(`^-?\d+\.\d{2}$`)

func TestParseValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
	}{
		{"0", "0.00"},
		{"10", "10.00"},
		{"38.5", "38.50"},
		{"38.50", "38.50"},
		{"0.01", "0.01"},
		{"-5.1", "-5.10"},
		{"-5.10", "-5.10"},
		{"-0", "0.00"},
		{"-0.0", "0.00"},
		{"-0.00", "0.00"},
		{"007.50", "7.50"}, // leading zeros carry no ambiguity, so they are allowed
		{"999999999999999.99", "999999999999999.99"},
		{"-999999999999999.99", "-999999999999999.99"},
		{"000000000000001", "1.00"}, // 15 digits including zeros
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			a, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if got := a.String(); got != tt.want {
				t.Fatalf("Parse(%q) = %s, want %s", tt.in, got, tt.want)
			}
			if !MustParse(tt.in).Equal(a) {
				t.Fatalf("MustParse(%q) differs from Parse", tt.in)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     error
	}{
		{"empty", "", ErrInvalid},
		{"minus only", "-", ErrInvalid},
		{"leading space", " 1", ErrInvalid},
		{"trailing space", "1 ", ErrInvalid},
		{"trailing newline", "1\n", ErrInvalid},
		{"plus", "+1", ErrInvalid},
		{"double minus", "--1", ErrInvalid},
		{"exponent", "1e3", ErrInvalid},
		{"upper exponent", "1E3", ErrInvalid},
		{"fraction exponent", "1.5e1", ErrInvalid},
		{"NaN", "NaN", ErrInvalid},
		{"nan", "nan", ErrInvalid},
		{"sNaN", "sNaN", ErrInvalid},
		{"Infinity", "Infinity", ErrInvalid},
		{"minus Infinity", "-Infinity", ErrInvalid},
		{"inf", "inf", ErrInvalid},
		{"letters", "abc", ErrInvalid},
		{"leading dot", ".5", ErrInvalid},
		{"minus leading dot", "-.5", ErrInvalid},
		{"trailing dot", "1.", ErrInvalid},
		{"two dots", "1.2.3", ErrInvalid},
		{"comma", "1,00", ErrInvalid},
		{"underscore", "1_000", ErrInvalid},
		{"hex", "0x10", ErrInvalid},
		{"non-ASCII digit", "\u0661", ErrInvalid},
		{"fullwidth digit", "\uff11", ErrInvalid},
		{"garbage after fraction", "1.2a", ErrInvalid},
		{"garbage inside long fraction", "1.234a", ErrInvalid},
		{"NUL", "1\x00", ErrInvalid},
		{"16 integer digits", "1234567890123456", ErrInvalid},
		{"16 digits with zeros", "0000000000000001", ErrInvalid},
		{"huge", strings.Repeat("9", 1000), ErrInvalid},
		{"three places", "1.234", ErrTooPrecise},
		{"three places trailing zero", "1.230", ErrTooPrecise},
		{"tiny", "0.001", ErrTooPrecise},
		{"negative three places", "-0.005", ErrTooPrecise},
		{"long fraction", "1." + strings.Repeat("0", 1000), ErrTooPrecise},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, err := Parse(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse(%q) = %v, %v; want error %v", tt.in, a, err, tt.want)
			}
			if !a.IsZero() {
				t.Fatalf("Parse(%q) returned non-zero amount %s with error", tt.in, a)
			}
			assertPanics(t, func() { MustParse(tt.in) })
		})
	}
}

// Errors end up in logs and API responses; hostile input must not be able to
// bloat them or inject line breaks.
func TestErrorMessageClipsAndEscapesInput(t *testing.T) {
	t.Parallel()
	tests := []string{
		strings.Repeat("9", 10_000),
		"1\nlevel=error msg=forged",
		strings.Repeat("\x1b[31m", 100),
		"1." + strings.Repeat("5", 500),
	}
	for _, in := range tests {
		_, err := Parse(in)
		if err == nil {
			t.Fatalf("Parse(%.20q...) succeeded", in)
		}
		msg := err.Error()
		if len(msg) > 250 {
			t.Errorf("error message is %d bytes: %.80s...", len(msg), msg)
		}
		if strings.ContainsAny(msg, "\n\x1b") {
			t.Errorf("error message contains raw control characters: %q", msg)
		}
	}
	_, err := Parse("1e3")
	if !strings.Contains(err.Error(), `"1e3"`) {
		t.Errorf("error %q does not quote the input", err)
	}
}

func TestParseRoundUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
		wantErr  error
	}{
		{in: "10.01", want: "11.00"},
		{in: "10", want: "10.00"},
		{in: "10.00", want: "10.00"},
		{in: "10.00000001", want: "11.00"},
		{in: "10.99999999", want: "11.00"},
		{in: "0.5", want: "1.00"},
		// Found by FuzzParse: apd's Quantize drops these to 0 regardless of
		// rounding mode.
		{in: "0.01", want: "1.00"},
		{in: "0.00000001", want: "1.00"},
		{in: "-0.01", want: "0.00"},
		{in: "0", want: "0.00"},
		// Ceiling, so negatives move toward zero, and the -0 it yields is
		// normalized.
		{in: "-10.5", want: "-10.00"},
		{in: "-0.5", want: "0.00"},
		{in: "999999999999999.1", want: "1000000000000000.00"},
		{in: "10.000000001", wantErr: ErrTooPrecise},
		{in: "1e1", wantErr: ErrInvalid},
		{in: "+10", wantErr: ErrInvalid},
		{in: "", wantErr: ErrInvalid},
		{in: "1234567890123456", wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			a, err := ParseRoundUp(tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ParseRoundUp(%q) = %v, %v; want %v", tt.in, a, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRoundUp(%q): %v", tt.in, err)
			}
			if got := a.String(); got != tt.want {
				t.Fatalf("ParseRoundUp(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestFromUnitsAndCents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cents int64
		want  string
	}{
		{1234, "12.34"},
		{-510, "-5.10"},
		{0, "0.00"},
		{5, "0.05"},
		{-5, "-0.05"},
		{100, "1.00"},
		{math.MaxInt64, "92233720368547758.07"},
		{math.MinInt64, "-92233720368547758.08"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			a := FromUnits(tt.cents)
			if got := a.String(); got != tt.want {
				t.Fatalf("FromUnits(%d) = %s, want %s", tt.cents, got, tt.want)
			}
			c, err := a.Cents()
			if err != nil || c != tt.cents {
				t.Fatalf("FromUnits(%d).Cents() = %d, %v", tt.cents, c, err)
			}
		})
	}
}

func TestCentsOverflow(t *testing.T) {
	t.Parallel()
	tests := []Amount{
		FromUnits(math.MaxInt64).Add(FromUnits(1)),
		FromUnits(math.MinInt64).Sub(FromUnits(1)),
		FromUnits(math.MaxInt64).Add(FromUnits(math.MaxInt64)),
	}
	for _, a := range tests {
		if c, err := a.Cents(); !errors.Is(err, ErrOverflow) {
			t.Errorf("%s.Cents() = %d, %v; want ErrOverflow", a, c, err)
		}
	}
}

func TestZeroValueIsZero(t *testing.T) {
	t.Parallel()
	var a Amount
	if a.String() != "0.00" || !a.IsZero() || a.Sign() != 0 || !a.Equal(Zero()) || Zero().String() != "0.00" {
		t.Fatalf("zero value: %q zero=%v sign=%d", a.String(), a.IsZero(), a.Sign())
	}
	if c, err := a.Cents(); c != 0 || err != nil {
		t.Fatalf("zero value Cents() = %d, %v", c, err)
	}
	if got := a.Add(MustParse("1.5")).String(); got != "1.50" {
		t.Fatalf("Amount{}.Add(1.5) = %s", got)
	}
	if got := a.Neg().String(); got != "0.00" {
		t.Fatalf("Amount{}.Neg() = %s", got)
	}
	b, err := json.Marshal(a)
	if err != nil || string(b) != `"0.00"` {
		t.Fatalf("json.Marshal(Amount{}) = %s, %v", b, err)
	}
	if v, err := a.Value(); v != "0.00" || err != nil {
		t.Fatalf("Amount{}.Value() = %v, %v", v, err)
	}
}

// Every path that can produce zero from negative inputs must yield +0, or
// String would print "-0.00" on receipts and statements.
func TestNegativeZeroNormalized(t *testing.T) {
	t.Parallel()
	mustScan := func(src any) Amount {
		var a Amount
		if err := a.Scan(src); err != nil {
			t.Fatalf("Scan(%v): %v", src, err)
		}
		return a
	}
	mustJSON := func(s string) Amount {
		var a Amount
		if err := json.Unmarshal([]byte(s), &a); err != nil {
			t.Fatalf("Unmarshal(%s): %v", s, err)
		}
		return a
	}
	mustRate := func(a Amount, rate string) Amount {
		r, err := a.MulRate(rate)
		if err != nil {
			t.Fatalf("MulRate(%s): %v", rate, err)
		}
		return r
	}
	mustRoundUp := func(s string) Amount {
		a, err := ParseRoundUp(s)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	tests := []struct {
		name string
		a    Amount
	}{
		{"parse -0", MustParse("-0")},
		{"parse -0.00", MustParse("-0.00")},
		{"neg zero", Zero().Neg()},
		{"neg neg zero", Zero().Neg().Neg()},
		{"x - x", MustParse("-7.25").Sub(MustParse("-7.25"))},
		{"-x + x", MustParse("-7.25").Add(MustParse("7.25"))},
		{"sum to zero", Sum(MustParse("-1"), MustParse("0.5"), MustParse("0.5"))},
		{"from units", FromUnits(0)},
		{"tiny negative product", mustRate(MustParse("-0.01"), "0.1")},
		{"negative times zero", mustRate(MustParse("-5"), "0")},
		{"zero times negative", mustRate(Zero(), "-1.5")},
		{"ceiling of -0.5", mustRoundUp("-0.5")},
		{"scan -0.00", mustScan([]byte("-0.00"))},
		{"scan -0.0000", mustScan("-0.0000")},
		{"scan int64 0", mustScan(int64(0))},
		{"json number -0", mustJSON("-0")},
		{"json string -0.00", mustJSON(`"-0.00"`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.a.String(); got != "0.00" {
				t.Fatalf("String() = %q, want 0.00", got)
			}
			if tt.a.Sign() != 0 || !tt.a.IsZero() || tt.a.Cmp(Zero()) != 0 {
				t.Fatalf("sign=%d zero=%v", tt.a.Sign(), tt.a.IsZero())
			}
			if b, _ := json.Marshal(tt.a); string(b) != `"0.00"` {
				t.Fatalf("JSON = %s", b)
			}
		})
	}
}

func TestArithmetic(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b          string
		sum, diff     string
		cmp           int
		negA          string
		signA, signSu int
	}{
		{"0.10", "0.20", "0.30", "-0.10", -1, "-0.10", 1, 1},
		{"38", "0.5", "38.50", "37.50", 1, "-38.00", 1, 1},
		{"-5.10", "5.10", "0.00", "-10.20", -1, "5.10", -1, 0},
		{"1.01", "1.01", "2.02", "0.00", 0, "-1.01", 1, 1},
		{"-0.01", "-0.01", "-0.02", "0.00", 0, "0.01", -1, -1},
		{"999999999999999.99", "0.01", "1000000000000000.00", "999999999999999.98", 1, "-999999999999999.99", 1, 1},
		{"999999999999999.99", "999999999999999.99", "1999999999999999.98", "0.00", 0, "-999999999999999.99", 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.a+"_"+tt.b, func(t *testing.T) {
			t.Parallel()
			a, b := MustParse(tt.a), MustParse(tt.b)
			if got := a.Add(b).String(); got != tt.sum {
				t.Errorf("%s + %s = %s, want %s", tt.a, tt.b, got, tt.sum)
			}
			if got := a.Sub(b).String(); got != tt.diff {
				t.Errorf("%s - %s = %s, want %s", tt.a, tt.b, got, tt.diff)
			}
			if got := a.Cmp(b); got != tt.cmp {
				t.Errorf("Cmp(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.cmp)
			}
			if got := b.Cmp(a); got != -tt.cmp {
				t.Errorf("Cmp(%s, %s) = %d, want %d", tt.b, tt.a, got, -tt.cmp)
			}
			if got := a.Equal(b); got != (tt.cmp == 0) {
				t.Errorf("Equal(%s, %s) = %v", tt.a, tt.b, got)
			}
			if got := a.Neg().String(); got != tt.negA {
				t.Errorf("-(%s) = %s, want %s", tt.a, got, tt.negA)
			}
			if got := a.Sign(); got != tt.signA {
				t.Errorf("Sign(%s) = %d, want %d", tt.a, got, tt.signA)
			}
			if got := a.Add(b).Sign(); got != tt.signSu {
				t.Errorf("Sign(%s + %s) = %d, want %d", tt.a, tt.b, got, tt.signSu)
			}
			// Operands must be untouched by the operations above.
			if a.String() != MustParse(tt.a).String() || b.String() != MustParse(tt.b).String() {
				t.Errorf("operands mutated: a=%s b=%s", a, b)
			}
		})
	}
}

// The classic float failure: ten dimes must be exactly one unit.
func TestSumIsExact(t *testing.T) {
	t.Parallel()
	dimes := make([]Amount, 10)
	for i := range dimes {
		dimes[i] = MustParse("0.10")
	}
	if got := Sum(dimes...); got.String() != "1.00" {
		t.Fatalf("Sum(10 x 0.10) = %s", got)
	}
	if got := Sum(); got.String() != "0.00" {
		t.Fatalf("Sum() = %s", got)
	}
	in := []Amount{MustParse("1.10"), MustParse("-0.60"), FromUnits(5), {}}
	if got := Sum(in...); got.String() != "0.55" {
		t.Fatalf("Sum = %s, want 0.55", got)
	}
	if in[0].String() != "1.10" || in[1].String() != "-0.60" {
		t.Fatalf("Sum mutated its inputs: %v", in)
	}
}

func TestMulRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		amount, rate, want string
	}{
		{"100.00", "0.015", "1.50"},
		{"33.33", "0.015", "0.50"},   // 0.49995, half rounds away from zero
		{"-33.33", "0.015", "-0.50"}, // symmetric for refunds
		{"33.33", "-0.015", "-0.50"},
		{"10.00", "0.0005", "0.01"},                 // exactly half a cent
		{"10.00", "0.0004999", "0.00"},              // just under half
		{"10.00", "0.00050001", "0.01"},             // just over half
		{"-10.00", "0.0005", "-0.01"},               // negative half
		{"123.45", "0.0077", "0.95"},                // 0.950565
		{"1.00", "130.25", "130.25"},                // FX
		{"1000.00", "0.007633587786259542", "7.63"}, // 18 places
		{"19.99", "1", "19.99"},
		{"19.99", "1.0", "19.99"},
		{"19.99", "0", "0.00"},
		{"19.99", "-1", "-19.99"},
		{"0.01", "0.5", "0.01"},
		{"0.01", "0.49", "0.00"},
		{"999999999999999.99", "999999999999999", "999999999999998990000000000000.01"},
	}
	for _, tt := range tests {
		t.Run(tt.amount+"*"+tt.rate, func(t *testing.T) {
			t.Parallel()
			a := MustParse(tt.amount)
			got, err := a.MulRate(tt.rate)
			if err != nil {
				t.Fatalf("MulRate: %v", err)
			}
			if got.String() != tt.want {
				t.Fatalf("%s * %s = %s, want %s", tt.amount, tt.rate, got, tt.want)
			}
			if a.String() != MustParse(tt.amount).String() {
				t.Fatalf("receiver mutated to %s", a)
			}
		})
	}
}

func TestMulRateInvalidRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rate string
		want error
	}{
		{"", ErrInvalid},
		{"1e-2", ErrInvalid},
		{"+0.1", ErrInvalid},
		{".015", ErrInvalid},
		{"abc", ErrInvalid},
		{"NaN", ErrInvalid},
		{"Infinity", ErrInvalid},
		{"0.015 ", ErrInvalid},
		{"1234567890123456", ErrInvalid},
		{"0.0000000000000000001", ErrTooPrecise}, // 19 places
	}
	for _, tt := range tests {
		t.Run(tt.rate, func(t *testing.T) {
			t.Parallel()
			got, err := MustParse("100").MulRate(tt.rate)
			if !errors.Is(err, tt.want) {
				t.Fatalf("MulRate(%q) = %v, %v; want %v", tt.rate, got, err, tt.want)
			}
			if !strings.Contains(err.Error(), "rate") {
				t.Fatalf("error %q does not say the rate was at fault", err)
			}
		})
	}
}

// Amounts far beyond apd's 128-bit inline storage keep their coefficient
// behind a pointer; copies then share it. Results must never write through
// that shared pointer.
func TestCopiesDoNotAlias(t *testing.T) {
	t.Parallel()
	big, err := FromUnits(math.MaxInt64).MulRate("999999999999999.999999999999999999")
	if err != nil {
		t.Fatal(err)
	}
	big, err = big.MulRate("999999999999999.999999999999999999")
	if err != nil {
		t.Fatal(err)
	}
	want := big.String()
	if len(want) < 45 {
		t.Fatalf("test amount %s is too small to leave inline storage", want)
	}
	cp := big
	m := map[string]Amount{"k": big}
	_ = cp.Add(FromUnits(1))
	_ = cp.Sub(FromUnits(1))
	_ = cp.Neg()
	_, _ = cp.MulRate("3")
	m["k"] = m["k"].Add(FromUnits(1))
	_ = Sum(cp, big, cp)
	if big.String() != want || cp.String() != want {
		t.Fatalf("copy mutation leaked: big=%s cp=%s", big, cp)
	}
	if got := m["k"].Sub(big).String(); got != "0.01" {
		t.Fatalf("map value: got diff %s", got)
	}

	// Shared reads from many goroutines; -race must stay quiet.
	var wg sync.WaitGroup
	shared := []Amount{big, MustParse("12.34"), {}}
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, a := range shared {
				s := a.Add(FromUnits(int64(i))).Sub(FromUnits(int64(i)))
				if !s.Equal(a) || s.String() != a.String() {
					t.Errorf("concurrent arithmetic changed %s to %s", a, s)
				}
				if _, err := a.MulRate("1.5"); err != nil {
					t.Error(err)
				}
				_, _ = a.MarshalJSON()
				_, _ = a.Value()
			}
		}()
	}
	wg.Wait()
}

type payment struct {
	Amount Amount  `json:"amount"`
	Fee    *Amount `json:"fee"`
}

func TestJSONRoundTrip(t *testing.T) {
	t.Parallel()
	fee := MustParse("1.5")
	tests := []struct {
		name string
		in   payment
		want string
	}{
		{"value and pointer", payment{Amount: MustParse("38.5"), Fee: &fee}, `{"amount":"38.50","fee":"1.50"}`},
		{"negative", payment{Amount: MustParse("-5.1"), Fee: &fee}, `{"amount":"-5.10","fee":"1.50"}`},
		{"nil pointer", payment{Amount: MustParse("0.01")}, `{"amount":"0.01","fee":null}`},
		{"zero value", payment{}, `{"amount":"0.00","fee":null}`},
		{"large", payment{Amount: FromUnits(math.MaxInt64)}, `{"amount":"92233720368547758.07","fee":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Fatalf("Marshal = %s, want %s", b, tt.want)
			}
			if tt.name == "large" {
				return // beyond the 15 digits a client may send
			}
			var out payment
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatalf("Unmarshal(%s): %v", b, err)
			}
			if !out.Amount.Equal(tt.in.Amount) {
				t.Fatalf("amount %s, want %s", out.Amount, tt.in.Amount)
			}
			if (out.Fee == nil) != (tt.in.Fee == nil) || (out.Fee != nil && !out.Fee.Equal(*tt.in.Fee)) {
				t.Fatalf("fee %v, want %v", out.Fee, tt.in.Fee)
			}
		})
	}
}

func TestJSONOtherContainers(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(map[string]any{
		"list": []Amount{MustParse("1"), FromUnits(-1)},
		"map":  map[string]Amount{"x": MustParse("2.5")},
		"any":  any(MustParse("3")),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"any":"3.00","list":["1.00","-0.01"],"map":{"x":"2.50"}}`
	if string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
}

func TestUnmarshalJSONAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body, want string
	}{
		{`{"amount": 12.5}`, "12.50"},
		{`{"amount": 12}`, "12.00"},
		{`{"amount": -0.01}`, "-0.01"},
		{`{"amount": -0}`, "0.00"},
		{`{"amount": 999999999999999.99}`, "999999999999999.99"},
		{`{"amount": "38.5"}`, "38.50"},
		{`{"amount": "38.50"}`, "38.50"},
		{`{"amount":"\u0031\u0032.5"}`, "12.50"}, // escapes decode like any JSON string
		{`{"amount" :  7.25 }`, "7.25"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			t.Parallel()
			var p payment
			if err := json.Unmarshal([]byte(tt.body), &p); err != nil {
				t.Fatalf("Unmarshal(%s): %v", tt.body, err)
			}
			if got := p.Amount.String(); got != tt.want {
				t.Fatalf("Unmarshal(%s) = %s, want %s", tt.body, got, tt.want)
			}
		})
	}
}

func TestUnmarshalJSONRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value string
		want  error
	}{
		{`1e3`, ErrInvalid},
		{`1E3`, ErrInvalid},
		{`1.5e1`, ErrInvalid},
		{`1e-2`, ErrInvalid},
		{`"1e3"`, ErrInvalid},
		{`"abc"`, ErrInvalid},
		{`""`, ErrInvalid},
		{`"1.234"`, ErrTooPrecise},
		{`1.234`, ErrTooPrecise},
		{`0.001`, ErrTooPrecise},
		{`" 1"`, ErrInvalid},
		{`"1 "`, ErrInvalid},
		{`"+1"`, ErrInvalid},
		{`"NaN"`, ErrInvalid},
		{`"Infinity"`, ErrInvalid},
		{`"-Infinity"`, ErrInvalid},
		{`"1.2.3"`, ErrInvalid},
		{`1234567890123456`, ErrInvalid},
		{`"1234567890123456"`, ErrInvalid},
		{`123456789012345678901234567890`, ErrInvalid},
		{`null`, ErrInvalid},
		{`true`, ErrInvalid},
		{`{}`, ErrInvalid},
		{`[]`, ErrInvalid},
		{`["1.00"]`, ErrInvalid},
		{`{"value":"1.00"}`, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			t.Parallel()
			// Via encoding/json, as handlers will use it.
			p := payment{Amount: MustParse("9.99")}
			err := json.Unmarshal([]byte(`{"amount":`+tt.value+`}`), &p)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Unmarshal(%s) = %v, want %v", tt.value, err, tt.want)
			}
			if p.Amount.String() != "9.99" {
				t.Fatalf("failed Unmarshal overwrote amount with %s", p.Amount)
			}
			// Directly, as other decoders may call it.
			a := MustParse("9.99")
			if err := a.UnmarshalJSON([]byte(tt.value)); !errors.Is(err, tt.want) {
				t.Fatalf("UnmarshalJSON(%s) = %v, want %v", tt.value, err, tt.want)
			}
			if a.String() != "9.99" {
				t.Fatalf("failed UnmarshalJSON overwrote amount with %s", a)
			}
		})
	}
}

func TestUnmarshalJSONDirectMalformed(t *testing.T) {
	t.Parallel()
	// Inputs encoding/json would never pass, but a direct caller might.
	for _, in := range []string{"", " ", "01", "-", `"1`, "1.", "12.5x", `"1.00" "2.00"`, "\x00"} {
		var a Amount
		if err := a.UnmarshalJSON([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("UnmarshalJSON(%q) = %v, want ErrInvalid", in, err)
		}
	}
}

// A nullable amount is expressed as *Amount; encoding/json handles null for
// it without calling UnmarshalJSON.
func TestUnmarshalJSONNullPointer(t *testing.T) {
	t.Parallel()
	p := payment{Fee: new(Amount)}
	if err := json.Unmarshal([]byte(`{"amount":"1","fee":null}`), &p); err != nil {
		t.Fatal(err)
	}
	if p.Fee != nil {
		t.Fatalf("fee = %v, want nil", p.Fee)
	}
	if err := json.Unmarshal([]byte(`{"amount":"1","fee":2.5}`), &p); err != nil {
		t.Fatal(err)
	}
	if p.Fee == nil || p.Fee.String() != "2.50" {
		t.Fatalf("fee = %v, want 2.50", p.Fee)
	}
}

func TestSQLValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a    Amount
		want string
	}{
		{MustParse("38"), "38.00"},
		{MustParse("-5.1"), "-5.10"},
		{Amount{}, "0.00"},
		{Zero().Neg(), "0.00"},
		{FromUnits(math.MinInt64), "-92233720368547758.08"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			v, err := tt.a.Value()
			if err != nil {
				t.Fatal(err)
			}
			// lib/pq sends strings as text, which NUMERIC parses exactly.
			s, ok := v.(string)
			if !ok || s != tt.want {
				t.Fatalf("Value() = %#v, want string %q", v, tt.want)
			}
			if !driver.IsValue(v) {
				t.Fatalf("Value() = %T is not a driver.Value", v)
			}
			var back Amount
			if err := back.Scan([]byte(s)); err != nil || !back.Equal(tt.a) {
				t.Fatalf("Scan(Value()) = %s, %v; want %s", back, err, tt.a)
			}
		})
	}
}

func TestSQLScan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		src     any
		want    string
		wantErr error
	}{
		{name: "bytes", src: []byte("38.50"), want: "38.50"},
		{name: "string", src: "38.5", want: "38.50"},
		{name: "integer text", src: []byte("38"), want: "38.00"},
		{name: "negative", src: []byte("-0.07"), want: "-0.07"},
		{name: "int64", src: int64(5), want: "5.00"},
		{name: "negative int64", src: int64(-12), want: "-12.00"},
		{name: "max int64", src: int64(math.MaxInt64), want: "9223372036854775807.00"},
		// NUMERIC without a (p,2) typmod, or SQL arithmetic, returns a wider
		// scale; zero tails are exact and accepted.
		{name: "numeric(12,4)", src: []byte("38.5000"), want: "38.50"},
		{name: "long zero tail", src: "1.00000000000000000000", want: "1.00"},
		// SUM over a ledger may exceed what one request may carry.
		{name: "large aggregate", src: []byte("12345678901234567890.12"), want: "12345678901234567890.12"},
		{name: "32 integer digits", src: strings.Repeat("9", 32) + ".99", want: strings.Repeat("9", 32) + ".99"},
		{name: "nonzero third place", src: []byte("38.505"), wantErr: ErrTooPrecise},
		{name: "AVG style", src: []byte("3.3333333333333333"), wantErr: ErrTooPrecise},
		{name: "float64", src: float64(38.5), wantErr: ErrInvalid},
		{name: "NULL", src: nil, wantErr: ErrInvalid},
		{name: "bool", src: true, wantErr: ErrInvalid},
		{name: "time", src: struct{}{}, wantErr: ErrInvalid},
		{name: "numeric NaN", src: []byte("NaN"), wantErr: ErrInvalid},
		{name: "numeric Infinity", src: []byte("Infinity"), wantErr: ErrInvalid},
		{name: "exponent", src: "1e3", wantErr: ErrInvalid},
		{name: "empty", src: []byte{}, wantErr: ErrInvalid},
		{name: "33 integer digits", src: strings.Repeat("9", 33), wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := MustParse("9.99")
			err := a.Scan(tt.src)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Scan(%#v) = %v, want %v", tt.src, err, tt.wantErr)
				}
				if a.String() != "9.99" {
					t.Fatalf("failed Scan overwrote amount with %s", a)
				}
				return
			}
			if err != nil {
				t.Fatalf("Scan(%#v): %v", tt.src, err)
			}
			if a.String() != tt.want {
				t.Fatalf("Scan(%#v) = %s, want %s", tt.src, a, tt.want)
			}
		})
	}
}

// Nullable columns go through sql.Null[Amount], which delegates to Scan.
func TestSQLNullAmount(t *testing.T) {
	t.Parallel()
	var n sql.Null[Amount]
	if err := n.Scan(nil); err != nil || n.Valid {
		t.Fatalf("Scan(nil) = %v valid=%v", err, n.Valid)
	}
	if err := n.Scan([]byte("4.20")); err != nil || !n.Valid || n.V.String() != "4.20" {
		t.Fatalf("Scan(4.20) = %v valid=%v v=%s", err, n.Valid, n.V)
	}
	if err := n.Scan(4.2); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Scan(float64) = %v, want ErrInvalid", err)
	}
}

func TestStringFormat(t *testing.T) {
	t.Parallel()
	tests := []Amount{
		Zero(), {}, FromUnits(1), FromUnits(-1), FromUnits(10), FromUnits(-100),
		MustParse("38"), MustParse("-5.1"), FromUnits(math.MaxInt64), FromUnits(math.MinInt64),
		FromUnits(math.MaxInt64).Add(FromUnits(math.MaxInt64)),
	}
	for _, a := range tests {
		s := a.String()
		if !twoPlaces.MatchString(s) {
			t.Errorf("String() = %q, not two places", s)
		}
		if got := fmt.Sprint(a); got != s {
			t.Errorf("fmt.Sprint = %q, String = %q", got, s)
		}
	}
}

func assertPanics(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Helper()
			t.Fatal("expected panic")
		}
	}()
	f()
}
