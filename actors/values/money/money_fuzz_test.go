package money

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"regexp"
	"strings"
	"testing"
)

// Seeds cover each grammar branch and the forms apd or encoding/json would
// accept but we must not, so the fuzzer starts next to the boundaries.
var parseSeeds = []string{
	"", "0", "-0", "-0.00", "0.01", "10", "38.5", "38.50", "-5.10", "007.50",
	"999999999999999.99", "-999999999999999.99", "1234567890123456",
	"1.234", "1.230", "0.001", "10.00000001", "10.000000001",
	"1e3", "1E3", "1.5e1", "+1", " 1", "1 ", ".5", "-.5", "1.", "-", "--1",
	"NaN", "sNaN", "Infinity", "-Inf", "0x10", "1_000", "1,00", "\u0661",
	"1\x00", "1.2.3", "9999999999999999999999999999999999999999",
}

func FuzzParse(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkRoundUp(t, s)

		a, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooPrecise) {
				t.Fatalf("Parse(%q) error %v wraps no sentinel", s, err)
			}
			if len(err.Error()) > 250 {
				t.Fatalf("Parse(%q) error message is %d bytes", s, len(err.Error()))
			}
			return
		}
		str := a.String()
		if !twoPlaces.MatchString(str) || str == "-0.00" {
			t.Fatalf("Parse(%q).String() = %q", s, str)
		}
		b, err := Parse(str)
		if err != nil || !b.Equal(a) || b.String() != str {
			t.Fatalf("Parse(%q) = %s does not re-parse: %s, %v", s, str, b, err)
		}
		// The value must be exactly the input; math/big is an independent
		// oracle for that.
		if want := mustRat(t, s); want.Cmp(mustRat(t, str)) != 0 {
			t.Fatalf("Parse(%q) = %s changed the value", s, str)
		}
		// Every parsed amount fits int64 cents and survives each encoding.
		c, err := a.Cents()
		if err != nil || !FromUnits(c).Equal(a) {
			t.Fatalf("Cents(%s) = %d, %v", str, c, err)
		}
		j, _ := a.MarshalJSON()
		var fromJSON Amount
		if err := fromJSON.UnmarshalJSON(j); err != nil || !fromJSON.Equal(a) {
			t.Fatalf("JSON round trip of %s via %s: %s, %v", str, j, fromJSON, err)
		}
		v, _ := a.Value()
		var fromSQL Amount
		if err := fromSQL.Scan(v); err != nil || !fromSQL.Equal(a) {
			t.Fatalf("SQL round trip of %s: %s, %v", str, fromSQL, err)
		}
		if one, err := a.MulRate("1"); err != nil || !one.Equal(a) {
			t.Fatalf("%s * 1 = %s, %v", str, one, err)
		}
		if z := a.Sub(a); !z.IsZero() || z.String() != "0.00" {
			t.Fatalf("%s - itself = %s", str, z)
		}
		if n := a.Neg(); !n.Add(a).IsZero() || n.Neg().String() != str {
			t.Fatalf("-(%s) = %s", str, n)
		}
	})
}

// checkRoundUp verifies ParseRoundUp against a math/big ceiling.
func checkRoundUp(t *testing.T, s string) {
	t.Helper()
	a, err := ParseRoundUp(s)
	if err != nil {
		if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooPrecise) {
			t.Fatalf("ParseRoundUp(%q) error %v wraps no sentinel", s, err)
		}
		return
	}
	str := a.String()
	if !strings.HasSuffix(str, ".00") || !twoPlaces.MatchString(str) || str == "-0.00" {
		t.Fatalf("ParseRoundUp(%q) = %q, not whole units", s, str)
	}
	in, got := mustRat(t, s), mustRat(t, str)
	// ceiling: in <= got < in+1
	if got.Cmp(in) < 0 || new(big.Rat).Sub(got, in).Cmp(big.NewRat(1, 1)) >= 0 {
		t.Fatalf("ParseRoundUp(%q) = %s is not the ceiling", s, str)
	}
}

// jsonOut is what MarshalJSON may produce.
var jsonOut = regexp.MustCompile(`^"-?\d+\.\d{2}"$`)

func FuzzUnmarshalJSON(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
		f.Add([]byte(`"` + s + `"`))
	}
	for _, s := range []string{
		`null`, `true`, `false`, `{}`, `[]`, `["1.00"]`, `"\u0031\u0032.5"`, `"\u002d1"`,
		` 12.5 `, "\t\"1\"\n", `"1.00" "2.00"`, `"1`, `12.5x`, `-0`, `-0.0`, `1.5e1`,
		`"\ud800"`, `"\\1"`, `0.10`, `123456789012345.67`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var a Amount
		err := a.UnmarshalJSON(b)

		// encoding/json must reach the same verdict and value, since that
		// is how handlers call us.
		var viaJSON Amount
		jsonErr := json.Unmarshal(b, &viaJSON)
		if (err == nil) != (jsonErr == nil) {
			t.Fatalf("UnmarshalJSON(%q) = %v but json.Unmarshal = %v", b, err, jsonErr)
		}

		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooPrecise) {
				t.Fatalf("UnmarshalJSON(%q) error %v wraps no sentinel", b, err)
			}
			if !a.IsZero() || a.String() != "0.00" {
				t.Fatalf("failed UnmarshalJSON(%q) changed the target to %s", b, a)
			}
			return
		}
		if !viaJSON.Equal(a) {
			t.Fatalf("UnmarshalJSON(%q) = %s but json.Unmarshal = %s", b, a, viaJSON)
		}
		m, err := a.MarshalJSON()
		if err != nil || !jsonOut.Match(m) || bytes.Equal(m, []byte(`"-0.00"`)) {
			t.Fatalf("MarshalJSON after UnmarshalJSON(%q) = %s, %v", b, m, err)
		}
		var back Amount
		if err := back.UnmarshalJSON(m); err != nil || !back.Equal(a) {
			t.Fatalf("re-unmarshal of %s = %s, %v", m, back, err)
		}
		if m2, _ := back.MarshalJSON(); !bytes.Equal(m, m2) {
			t.Fatalf("marshal not stable: %s then %s", m, m2)
		}
	})
}

// FuzzMulRate checks the one rounding arithmetic operation against a
// math/big implementation of round-half-away-from-zero to cents.
func FuzzMulRate(f *testing.F) {
	for _, c := range [][2]string{
		{"100.00", "0.015"}, {"33.33", "0.015"}, {"-33.33", "0.015"}, {"10.00", "0.0005"},
		{"10.00", "0.0004999"}, {"123.45", "0.0077"}, {"1", "130.25"}, {"0.01", "0.5"},
		{"999999999999999.99", "999999999999999.999999999999999999"}, {"-0.01", "0.1"},
		{"5", "1e-2"}, {"5", "0.0000000000000000001"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, amount, rate string) {
		a, err := Parse(amount)
		if err != nil {
			return
		}
		got, err := a.MulRate(rate)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooPrecise) {
				t.Fatalf("MulRate(%q) error %v wraps no sentinel", rate, err)
			}
			return
		}
		p := new(big.Rat).Mul(mustRat(t, amount), mustRat(t, rate))
		p.Mul(p, big.NewRat(100, 1))
		// |p| + 1/2, floored, with p's sign: half away from zero.
		num := new(big.Int).Abs(p.Num())
		num.Mul(num, big.NewInt(2)).Add(num, p.Denom())
		cents := num.Quo(num, new(big.Int).Mul(p.Denom(), big.NewInt(2)))
		if p.Sign() < 0 {
			cents.Neg(cents)
		}
		want := new(big.Rat).SetFrac(cents, big.NewInt(100))
		if mustRat(t, got.String()).Cmp(want) != 0 {
			t.Fatalf("%s * %s = %s, want %s", amount, rate, got, want.FloatString(2))
		}
		if s := got.String(); !twoPlaces.MatchString(s) || s == "-0.00" {
			t.Fatalf("%s * %s formatted as %q", amount, rate, s)
		}
	})
}

func mustRat(t *testing.T, s string) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("math/big cannot parse %q, which money accepted", s)
	}
	return r
}
