package tariff

import (
	"errors"
	"math/big"
	"testing"

	"paysvc/actors/values/money"
)

// FuzzQuote checks that Quote never panics and that every result keeps the
// invariants: Value = NetAmount + Charges exactly, nothing negative,
// NetAmount > 0, the tariff's own identity (Value = amount or
// NetAmount = amount), and a fee equal to an independent math/big
// computation of the rule. The schedule itself is fuzzed too: when cfg
// parses it is used (and must round-trip through String), otherwise the
// default schedule is.
func FuzzQuote(f *testing.F) {
	seeds := []struct {
		cfg, method, tariff string
		cents               int64
	}{
		{"", MethodMpesa, BusinessPays, 100000},
		{"", MethodMpesa, CustomerPays, 100100},
		{"", MethodPesalink, BusinessPays, 1000},
		{"", MethodPesalink, "", 1001},
		{"", MethodCard, CustomerPays, 1},
		{"", MethodCard, "business-pays", 500},
		{"", "MPESA", BusinessPays, 500},
		{"", MethodMpesa, BusinessPays, 0},
		{"", MethodMpesa, BusinessPays, -1},
		{"", MethodMpesa, CustomerPays, 1<<63 - 1},
		{"", MethodCard, BusinessPays, -1 << 63},
		{"CARD=100%", MethodCard, BusinessPays, 100},
		{"CARD=100%", MethodCard, CustomerPays, 100},
		{"CARD=0%+25.00,min=30,max=30", MethodCard, BusinessPays, 3001},
		{"M-PESA=0.5%;PESALINK=1.25%+0.30,min=1,max=99.99", MethodPesalink, CustomerPays, 12345},
		{"M-PESA=0.0000000000000001%", MethodMpesa, BusinessPays, 1<<63 - 1},
		{"CARD=3.5 %+ 1 , max = 0", MethodCard, BusinessPays, 7},
		{"CARD=1.5%,min=1,min=2", MethodCard, BusinessPays, 7},
		{"USD=129.50;EUR=151.2;GBP=174.8", MethodCard, BusinessPays, 1001},
		{"UGX=0.035;KES=1", MethodCard, BusinessPays, -5},
	}
	for _, s := range seeds {
		f.Add(s.cfg, s.method, s.tariff, s.cents)
	}
	f.Fuzz(func(t *testing.T, cfg, method, tariff string, cents int64) {
		s, err := ParseSchedule(cfg)
		if err != nil {
			if !errors.Is(err, ErrBadSchedule) {
				t.Fatalf("ParseSchedule(%q) error %v is not ErrBadSchedule", cfg, err)
			}
			if len(err.Error()) > 600 {
				t.Fatalf("ParseSchedule(%q) error is %d bytes", cfg, len(err.Error()))
			}
			s = DefaultSchedule()
		} else if back, err := ParseSchedule(s.String()); err != nil || back.String() != s.String() {
			t.Fatalf("ParseSchedule(%q).String() = %q does not round-trip: %v", cfg, s.String(), err)
		}

		amount := money.FromUnits(cents)
		checkRoundUp(t, amount)
		checkRates(t, cfg, amount)

		q, err := s.Quote(method, tariff, amount)
		if err != nil {
			checkQuoteError(t, s, method, tariff, amount, err)
			return
		}
		rule, ok := s.Rule(method)
		if !ok {
			t.Fatalf("Quote succeeded for unpriced method %q", method)
		}
		if !q.Value.Equal(q.NetAmount.Add(q.Charges)) {
			t.Fatalf("Value %s != NetAmount %s + Charges %s", q.Value, q.NetAmount, q.Charges)
		}
		if q.Charges.Sign() < 0 || q.NetAmount.Sign() <= 0 || q.Value.Sign() <= 0 {
			t.Fatalf("Quote(%s) = %+v has a negative or zero part", amount, q)
		}
		switch tariff {
		case "", BusinessPays:
			if !q.Value.Equal(amount) {
				t.Fatalf("BUSINESS-PAYS Value %s != amount %s", q.Value, amount)
			}
		case CustomerPays:
			if !q.NetAmount.Equal(amount) {
				t.Fatalf("CUSTOMER-PAYS NetAmount %s != amount %s", q.NetAmount, amount)
			}
		default:
			t.Fatalf("Quote accepted tariff %q", tariff)
		}
		if want := oracleFee(t, rule, cents); !q.Charges.Equal(want) {
			t.Fatalf("Charges %s, oracle %s (rule %+v, amount %s)", q.Charges, want, rule, amount)
		}
		if q.Charges.Cmp(rule.Min) < 0 || (!rule.Max.IsZero() && q.Charges.Cmp(rule.Max) > 0) {
			t.Fatalf("Charges %s outside [%s, %s]", q.Charges, rule.Min, rule.Max)
		}
	})
}

// checkQuoteError checks that a failed Quote failed for a reason that
// actually holds.
func checkQuoteError(t *testing.T, s *Schedule, method, tariff string, amount money.Amount, err error) {
	t.Helper()
	_, priced := s.Rule(method)
	validTariff := tariff == "" || tariff == BusinessPays || tariff == CustomerPays
	switch {
	case errors.Is(err, ErrUnknownTariff):
		if validTariff {
			t.Fatalf("tariff %q rejected: %v", tariff, err)
		}
	case errors.Is(err, ErrUnknownMethod):
		if priced || !validTariff {
			t.Fatalf("method %q rejected: %v", method, err)
		}
	case errors.Is(err, ErrInvalidAmount):
		if amount.Sign() > 0 || !priced || !validTariff {
			t.Fatalf("amount %s rejected: %v", amount, err)
		}
	case errors.Is(err, ErrFeeExceedsAmount):
		fee, ferr := s.Fee(method, amount)
		if tariff == CustomerPays || ferr != nil || fee.Cmp(amount) < 0 {
			t.Fatalf("ErrFeeExceedsAmount with fee %s (%v) on %s under %q", fee, ferr, amount, tariff)
		}
	default:
		t.Fatalf("Quote error %v wraps no expected sentinel", err)
	}
	if len(err.Error()) > 400 {
		t.Fatalf("error message is %d bytes", len(err.Error()))
	}
}

// oracleFee recomputes the rule with math/big: amount × rate rounded half
// up to cents, plus Fixed, clamped to [Min, Max].
func oracleFee(t *testing.T, r Rule, cents int64) money.Amount {
	t.Helper()
	rate, ok := new(big.Rat).SetString(r.Percent)
	if !ok {
		t.Fatalf("oracle cannot read rate %q", r.Percent)
	}
	// fee in cents = floor(cents × rate + 1/2), for cents > 0.
	x := new(big.Rat).Mul(new(big.Rat).SetInt64(cents), rate)
	x.Add(x, big.NewRat(1, 2))
	q := new(big.Int).Quo(x.Num(), x.Denom()) // x > 0, so Quo is floor
	feeCents := q.Int64()
	fixed, _ := r.Fixed.Cents()
	minC, _ := r.Min.Cents()
	maxC, _ := r.Max.Cents()
	fee := money.FromUnits(feeCents).Add(money.FromUnits(fixed))
	if fee.Cmp(money.FromUnits(minC)) < 0 {
		fee = money.FromUnits(minC)
	}
	if maxC != 0 && fee.Cmp(money.FromUnits(maxC)) > 0 {
		fee = money.FromUnits(maxC)
	}
	return fee
}

// checkRoundUp compares RoundUpShillings with money.ParseRoundUp, the
// reference the API names, and checks it is the least whole amount >= a.
func checkRoundUp(t *testing.T, a money.Amount) {
	t.Helper()
	got := RoundUpShillings(a)
	if ref, err := money.ParseRoundUp(a.String()); err == nil && !ref.Equal(got) {
		t.Fatalf("RoundUpShillings(%s) = %s, ParseRoundUp = %s", a, got, ref)
	}
	c, err := got.Cents()
	if err != nil {
		// Only possible within a shilling of the int64 limit.
		return
	}
	if c%100 != 0 || got.Cmp(a) < 0 || got.Sub(a).Cmp(money.FromUnits(100)) >= 0 {
		t.Fatalf("RoundUpShillings(%s) = %s is not the ceiling", a, got)
	}
}

// checkRates parses cfg as an FX table too (the fuzzer explores both
// grammars from one string) and checks every conversion against math/big.
func checkRates(t *testing.T, cfg string, amount money.Amount) {
	t.Helper()
	r, err := ParseRates(cfg)
	if err != nil {
		if !errors.Is(err, ErrBadRates) || len(err.Error()) > 600 {
			t.Fatalf("ParseRates(%q) error %v", cfg, err)
		}
		return
	}
	if back, err := ParseRates(r.String()); err != nil || back.String() != r.String() {
		t.Fatalf("ParseRates(%q).String() = %q does not round-trip: %v", cfg, r.String(), err)
	}
	cents, _ := amount.Cents()
	for _, c := range r.Currencies() {
		kes, rate, err := r.ToKES(c, amount)
		if err != nil {
			t.Fatalf("ToKES(%s, %s): %v", c, amount, err)
		}
		if c == Settlement && (rate != "1" || !kes.Equal(amount)) {
			t.Fatalf("ToKES(KES, %s) = %s at %s", amount, kes, rate)
		}
		// Half away from zero: round |x| half up, then restore the sign.
		x, _ := new(big.Rat).SetString(rate)
		x.Mul(x, new(big.Rat).SetInt64(cents))
		neg := x.Sign() < 0
		x.Abs(x).Add(x, big.NewRat(1, 2))
		q := new(big.Int).Quo(x.Num(), x.Denom())
		if neg {
			q.Neg(q)
		}
		want, ok := new(big.Rat).SetString(kes.String())
		if !ok || want.Cmp(new(big.Rat).SetFrac(q, big.NewInt(100))) != 0 {
			t.Fatalf("ToKES(%s, %s) = %s at %s, oracle %s cents", c, amount, kes, rate, q)
		}
	}
}
