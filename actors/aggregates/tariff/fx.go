package tariff

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"paysvc/actors/values/money"
)

// Settlement is the currency every collection settles in.
const Settlement = "KES"

var (
	// ErrUnknownCurrency: the rate table has no rate for the currency.
	ErrUnknownCurrency = errors.New("tariff: unknown currency")
	// ErrBadRates: an FX rate table (string) is invalid.
	ErrBadRates = errors.New("tariff: invalid FX rates")
)

// Rates converts amounts into KES: for each currency, how many KES one unit
// is worth, as an exact decimal string. KES is always present at rate 1.
// Rates is immutable and safe for concurrent use.
type Rates struct {
	kesPer map[string]string
}

// DefaultRates returns the indicative table documented in docs/fees.md:
// KES 1, USD 129.50, EUR 151.20, GBP 174.80, UGX 0.035, TZS 0.05 (KES per
// unit; UGX and TZS are taken by checkout sessions only). These are
// configuration defaults, not live market rates; production sets
// PAYSVC_FX_RATES.
func DefaultRates() *Rates {
	r, err := ParseRates("USD=129.50;EUR=151.20;GBP=174.80;UGX=0.035;TZS=0.05")
	if err != nil {
		panic(err) // the literal above is wrong; a test catches this
	}
	return r
}

// ParseRates parses a rate table such as "USD=129.50;EUR=151.20;GBP=174.80":
// entries CODE=RATE separated by ';' (spaces around separators ignored, a
// trailing ';' allowed). CODE is a three-letter upper-case ISO 4217 code,
// each at most once; RATE is the KES value of one unit, a plain decimal
// greater than 0 with at most 18 decimal places. KES is implied at 1 and
// may only be listed as exactly 1. The table holds exactly the listed
// currencies plus KES.
//
// Errors wrap ErrBadRates and quote the entry and the part at fault.
func ParseRates(s string) (*Rates, error) {
	r := &Rates{kesPer: map[string]string{Settlement: "1"}}
	listed := map[string]bool{}
	for i, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		code, rate, ok := strings.Cut(entry, "=")
		code, rate = strings.TrimSpace(code), strings.TrimSpace(rate)
		fail := func(format string, args ...any) (*Rates, error) {
			return nil, fmt.Errorf("%w: entry %d %s: %s", ErrBadRates, i+1, clip(entry), fmt.Sprintf(format, args...))
		}
		if !ok {
			return fail("want CODE=RATE")
		}
		if !isCurrencyCode(code) {
			return fail("currency %s is not a three-letter upper-case code", clip(code))
		}
		if listed[code] {
			return fail("currency %s listed twice", code)
		}
		listed[code] = true
		c, err := canonRate(rate)
		if err != nil {
			return fail("rate %s: %v", clip(rate), err)
		}
		if rateIsZero(c) {
			return fail("rate %s must be greater than 0", clip(rate))
		}
		if code == Settlement && c != "1" {
			return fail("rate %s for %s must be 1", clip(rate), Settlement)
		}
		if _, err := money.FromUnits(1).MulRate(c); err != nil {
			return fail("rate %s: %v", clip(rate), err)
		}
		r.kesPer[code] = c
	}
	if len(listed) == 0 {
		return nil, fmt.Errorf("%w: no entries in %s", ErrBadRates, clip(s))
	}
	return r, nil
}

func isCurrencyCode(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// Currencies returns the currencies in the table, KES included, sorted.
func (r *Rates) Currencies() []string {
	if r == nil {
		return nil
	}
	cs := make([]string, 0, len(r.kesPer))
	for c := range r.kesPer {
		cs = append(cs, c)
	}
	slices.Sort(cs)
	return cs
}

// String returns the table in ParseRates syntax, sorted, KES left out, so
// the effective configuration can be logged at start-up and parsed back.
func (r *Rates) String() string {
	var parts []string
	for _, c := range r.Currencies() {
		if c != Settlement {
			parts = append(parts, c+"="+r.kesPer[c])
		}
	}
	return strings.Join(parts, ";")
}

// ToKES converts amount in currency to KES at the table's rate, rounded
// half-up to cents (half away from zero for negative amounts), and returns
// the rate used (KES per unit, canonical decimal such as "129.5") so the
// caller can record it next to the converted amount. KES converts at "1"
// unchanged. Currency codes are matched exactly (upper case).
func (r *Rates) ToKES(currency string, amount money.Amount) (kes money.Amount, rate string, err error) {
	var ok bool
	if r != nil {
		rate, ok = r.kesPer[currency]
	}
	if !ok {
		return money.Amount{}, "", fmt.Errorf("%w %s (configured: %s)", ErrUnknownCurrency, clip(currency), strings.Join(r.Currencies(), ", "))
	}
	kes, err = amount.MulRate(rate)
	if err != nil {
		// ParseRates checked the rate, so this is a broken invariant.
		return money.Amount{}, "", fmt.Errorf("%w: %s: %v", ErrBadRates, currency, err)
	}
	return kes, rate, nil
}
