package tariff

import (
	"errors"
	"strings"
	"testing"

	"paysvc/actors/values/money"
)

func TestDefaultRates(t *testing.T) {
	t.Parallel()
	r := DefaultRates()
	if got, want := r.String(), "EUR=151.2;GBP=174.8;TZS=0.05;UGX=0.035;USD=129.5"; got != want {
		t.Fatalf("DefaultRates().String() = %q, want %q", got, want)
	}
	if got, want := strings.Join(r.Currencies(), ","), "EUR,GBP,KES,TZS,UGX,USD"; got != want {
		t.Fatalf("Currencies() = %q, want %q", got, want)
	}
}

func TestToKES(t *testing.T) {
	t.Parallel()
	custom, err := ParseRates("USD=129.505;JPY=0.8654")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		r        *Rates
		currency string
		amount   string
		want     string
		rate     string
	}{
		{"kes unchanged", DefaultRates(), "KES", "1234.56", "1234.56", "1"},
		{"usd", DefaultRates(), "USD", "100", "12950.00", "129.5"},
		{"usd cents", DefaultRates(), "USD", "0.01", "1.30", "129.5"}, // 1.295 half-up
		{"eur", DefaultRates(), "EUR", "19.99", "3022.49", "151.2"},   // 3022.488
		{"gbp", DefaultRates(), "GBP", "1", "174.80", "174.8"},
		{"zero", DefaultRates(), "USD", "0", "0.00", "129.5"},
		{"negative half away from zero", DefaultRates(), "USD", "-0.01", "-1.30", "129.5"},
		{"three-place rate exact half", custom, "USD", "1", "129.51", "129.505"},   // 129.505
		{"three-place rate rounds up", custom, "USD", "0.01", "1.30", "129.505"},   // 1.29505
		{"three-place rate rounds down", custom, "USD", "0.02", "2.59", "129.505"}, // 2.5901
		{"small rate", custom, "JPY", "10000", "8654.00", "0.8654"},
		{"small rate rounding", custom, "JPY", "1", "0.87", "0.8654"},
		{"kes implied in custom table", custom, "KES", "5", "5.00", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, rate, err := tt.r.ToKES(tt.currency, money.MustParse(tt.amount))
			if err != nil || got.String() != tt.want || rate != tt.rate {
				t.Fatalf("ToKES(%s, %s) = %s, %q, %v; want %s, %q", tt.currency, tt.amount, got, rate, err, tt.want, tt.rate)
			}
		})
	}
}

func TestToKESErrors(t *testing.T) {
	t.Parallel()
	kesOnly, err := ParseRates("KES=1")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		r        *Rates
		currency string
		wantMsg  string
	}{
		{"unknown", DefaultRates(), "RWF", `"RWF" (configured: EUR, GBP, KES, TZS, UGX, USD)`},
		{"lower case", DefaultRates(), "usd", `"usd"`},
		{"empty", DefaultRates(), "", `""`},
		{"not configured", kesOnly, "USD", `"USD" (configured: KES)`},
		{"nil table", nil, "KES", `"KES"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, rate, err := tt.r.ToKES(tt.currency, money.MustParse("1"))
			if !errors.Is(err, ErrUnknownCurrency) || !strings.Contains(err.Error(), tt.wantMsg) || rate != "" {
				t.Fatalf("ToKES error = %v, rate %q; want ErrUnknownCurrency containing %q", err, rate, tt.wantMsg)
			}
		})
	}
}

func TestParseRates(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"USD=129.50;EUR=140.10;GBP=163.20", "EUR=140.1;GBP=163.2;USD=129.5"},
		{" USD = 129.50 ; ", "USD=129.5"},
		{"KES=1;USD=130", "USD=130"},
		{"KES=1.000", ""},
		{"UGX=0.035;TZS=0.0499", "TZS=0.0499;UGX=0.035"},
		{"USD=0." + strings.Repeat("0", 17) + "1", "USD=0." + strings.Repeat("0", 17) + "1"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			r, err := ParseRates(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
			if tt.want == "" {
				return
			}
			back, err := ParseRates(r.String())
			if err != nil || back.String() != tt.want {
				t.Fatalf("round trip = %v, %v", back, err)
			}
		})
	}
}

func TestParseRatesErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, wantMsg string }{
		{"", `no entries in ""`},
		{";;", "no entries"},
		{"USD", `entry 1 "USD": want CODE=RATE`},
		{"usd=129", `currency "usd" is not a three-letter`},
		{"US=129", `currency "US"`},
		{"USDX=129", `currency "USDX"`},
		{"=129", `currency ""`},
		{"USD=", `rate "": empty`},
		{"USD=abc", `rate "abc": want a plain decimal`},
		{"USD=-129", `rate "-129"`},
		{"USD=1e2", `rate "1e2"`},
		{"USD=129,50", `rate "129,50"`},
		{"USD=0", `rate "0" must be greater than 0`},
		{"USD=0.000", `rate "0.000" must be greater than 0`},
		{"USD=0." + strings.Repeat("0", 18) + "1", "more than 18 decimal places"},
		{"USD=1234567890123456", "more than 15 integer digits"},
		{"KES=2", `rate "2" for KES must be 1`},
		{"USD=129;EUR=140;USD=130", `entry 3 "USD=130": currency USD listed twice`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			r, err := ParseRates(tt.in)
			if !errors.Is(err, ErrBadRates) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("ParseRates(%q) = %v, %v; want ErrBadRates containing %q", tt.in, r, err, tt.wantMsg)
			}
		})
	}
}
