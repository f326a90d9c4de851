package tariff

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"paysvc/actors/values/money"
)

// Tariffs: who pays the fee. The spellings are the API's (mobile_tarrif,
// bank_tarrif, card_tarrif) and are matched exactly.
const (
	BusinessPays = "BUSINESS-PAYS"
	CustomerPays = "CUSTOMER-PAYS"
)

// Methods priced by the schedule. The spellings are the API's provider
// names and are matched exactly.
const (
	MethodMpesa    = "M-PESA"
	MethodPesalink = "PESALINK"
	MethodCard     = "CARD"
)

// Payout methods: "PAYOUT-" and the payout provider, so a bank payout and a bank
// collection are priced apart.
const (
	PayoutB2C      = "PAYOUT-MPESA-B2C"
	PayoutB2B      = "PAYOUT-MPESA-B2B"
	PayoutPesalink = "PAYOUT-PESALINK"
	PayoutAirtime  = "PAYOUT-AIRTIME"
	PayoutRTGS     = "PAYOUT-RTGS"
	PayoutP2P      = "PAYOUT-P2P"
)

// PayoutMethod is the schedule's name for a payout provider.
func PayoutMethod(provider string) string { return "PAYOUT-" + provider }

// knownMethods are the only names a Schedule may price, so that a typo in
// configuration ("MPESA=") fails at start-up instead of leaving M-Pesa
// unpriced.
var knownMethods = []string{MethodCard, MethodMpesa, MethodPesalink,
	PayoutB2C, PayoutB2B, PayoutPesalink, PayoutAirtime, PayoutRTGS, PayoutP2P}

// Sentinel errors; every error from this package wraps exactly one.
var (
	// ErrUnknownMethod: the schedule has no rule for the method.
	ErrUnknownMethod = errors.New("tariff: unknown payment method")
	// ErrUnknownTariff: the tariff is neither BUSINESS-PAYS nor CUSTOMER-PAYS.
	ErrUnknownTariff = errors.New("tariff: unknown tariff")
	// ErrInvalidAmount: the amount to price is zero or negative.
	ErrInvalidAmount = errors.New("tariff: amount must be greater than 0")
	// ErrFeeExceedsAmount: under BUSINESS-PAYS the fee would consume the
	// whole amount, leaving nothing (or less) for the wallet.
	ErrFeeExceedsAmount = errors.New("tariff: fee is not less than the amount")
	// ErrBadSchedule: a fee schedule (string or rules) is invalid.
	ErrBadSchedule = errors.New("tariff: invalid fee schedule")
)

const (
	// maxRateFrac is money.MulRate's limit on decimal places of a rate.
	maxRateFrac = 18
	// maxRateInt bounds the integer digits of a rate, like money's 15-digit
	// cap on amounts; no real FX rate or fee comes near it.
	maxRateInt = 15
	// errInputMax caps how much of an offending value an error repeats.
	errInputMax = 40
)

// Rule prices one payment method:
//
//	fee = clamp(round_half_up_cents(amount × Percent) + Fixed, Min, Max)
//
// Fixed, Min and Max are KES amounts.
type Rule struct {
	// Percent is the decimal rate, not a percentage: "0.015" is 1.5%.
	// It must be between "0" and "1" inclusive with at most 18 decimal
	// places; "" is invalid (write "0" for a fixed-only fee).
	Percent string
	// Fixed is added to the percentage part.
	Fixed money.Amount
	// Min is the smallest fee charged.
	Min money.Amount
	// Max is the largest fee charged; zero means no cap.
	Max money.Amount
}

// Schedule maps each payment method to its Rule. It is immutable and safe
// for concurrent use. Build one with DefaultSchedule, ParseSchedule or
// NewSchedule.
type Schedule struct {
	rules map[string]Rule
}

// DefaultSchedule returns the fee table documented in docs/fees.md:
//
//	M-PESA    1.5%, no minimum, no cap
//	PESALINK  0.5%, minimum KES 10.00, cap KES 200.00
//	CARD      3.5%, no minimum, no cap
//
// and payouts (the fee is added to what the wallet pays):
//
//	PAYOUT-MPESA-B2C  1%, minimum KES 10.00, cap KES 100.00
//	PAYOUT-MPESA-B2B  1%, minimum KES 10.00, cap KES 200.00
//	PAYOUT-PESALINK   KES 50.00
//	PAYOUT-AIRTIME    free
//	PAYOUT-RTGS       KES 500.00
//	PAYOUT-P2P        free
func DefaultSchedule() *Schedule {
	s, err := NewSchedule(map[string]Rule{
		MethodMpesa:    {Percent: "0.015"},
		MethodPesalink: {Percent: "0.005", Min: money.MustParse("10.00"), Max: money.MustParse("200.00")},
		MethodCard:     {Percent: "0.035"},
		PayoutB2C:      {Percent: "0.01", Min: money.MustParse("10.00"), Max: money.MustParse("100.00")},
		PayoutB2B:      {Percent: "0.01", Min: money.MustParse("10.00"), Max: money.MustParse("200.00")},
		PayoutPesalink: {Percent: "0", Fixed: money.MustParse("50.00")},
		PayoutAirtime:  {Percent: "0"},
		PayoutRTGS:     {Percent: "0", Fixed: money.MustParse("500.00")},
		PayoutP2P:      {Percent: "0"},
	})
	if err != nil {
		panic(err) // the literals above are wrong; a test catches this
	}
	return s
}

// NewSchedule validates rules and returns a Schedule holding a copy of them.
// Methods must be among the collection methods (M-PESA, PESALINK, CARD) and the
// payout methods (PAYOUT-<provider>); at least one is required.
// A rule is invalid when Percent is not a rate in [0, 1], when Fixed, Min or
// Max is negative, or when a cap is set below the minimum.
func NewSchedule(rules map[string]Rule) (*Schedule, error) {
	if len(rules) == 0 {
		return nil, fmt.Errorf("%w: no methods", ErrBadSchedule)
	}
	s := &Schedule{rules: make(map[string]Rule, len(rules))}
	for method, r := range rules {
		if !slices.Contains(knownMethods, method) {
			return nil, fmt.Errorf("%w: method %s is not one of %s", ErrBadSchedule, clip(method), strings.Join(knownMethods, ", "))
		}
		canon, err := checkRule(r)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadSchedule, method, err)
		}
		// P2P files may pay USD, EUR or GBP wallets, but fixed, minimum and maximum
		// fees are KES amounts: applied to a USD file they would charge dollars. Only
		// a percentage means the same in every currency.
		if method == PayoutP2P && (!canon.Fixed.IsZero() || !canon.Min.IsZero() || !canon.Max.IsZero()) {
			return nil, fmt.Errorf("%w: %s: only a percentage (P2P files may be in USD, EUR or GBP, and fixed, min and max are KES amounts)",
				ErrBadSchedule, method)
		}
		s.rules[method] = canon
	}
	return s, nil
}

// checkRule validates r and returns it with Percent in canonical form.
func checkRule(r Rule) (Rule, error) {
	p, err := canonRate(r.Percent)
	if err != nil {
		return Rule{}, fmt.Errorf("percent rate %s: %v", clip(r.Percent), err)
	}
	if !rateAtMostOne(p) {
		return Rule{}, fmt.Errorf("percent rate %s is above 1 (100%%)", clip(r.Percent))
	}
	for _, f := range []struct {
		name string
		a    money.Amount
	}{{"fixed", r.Fixed}, {"min", r.Min}, {"max", r.Max}} {
		if f.a.Sign() < 0 {
			return Rule{}, fmt.Errorf("%s %s is negative", f.name, f.a)
		}
	}
	if !r.Max.IsZero() && r.Min.Cmp(r.Max) > 0 {
		return Rule{}, fmt.Errorf("min %s is above max %s", r.Min, r.Max)
	}
	// Belt and braces: the rate must be one money accepts.
	if _, err := money.FromUnits(1).MulRate(p); err != nil {
		return Rule{}, fmt.Errorf("percent rate %s: %v", clip(r.Percent), err)
	}
	r.Percent = p
	return r, nil
}

// ParseSchedule parses a fee schedule such as
//
//	M-PESA=1.5%;PESALINK=0.5%,min=10.00,max=200.00;CARD=3.5%+10.00
//
// Grammar (spaces around separators are ignored, a trailing ';' is allowed):
//
//	schedule = entry { ";" entry }
//	entry    = METHOD "=" fee { "," option }
//	fee      = PERCENT "%" [ "+" AMOUNT ]        percentage, plus a fixed part
//	option   = "min=" AMOUNT | "max=" AMOUNT    max omitted or 0.00: no cap
//
// METHOD is M-PESA, PESALINK, CARD or a payout method (PAYOUT-MPESA-B2C, ...),
// each at most once. PERCENT is a plain
// decimal between 0 and 100 ("1.5", "0.25"); the '%' is mandatory so that
// "CARD=3.5" cannot be mistaken for a fixed KES 3.50. A fixed-only fee is
// written "0%+25.00". AMOUNT is a KES amount with at most two decimal
// places. The result contains exactly the listed methods: a method left out
// is not priced and Fee and Quote refuse it.
//
// Errors wrap ErrBadSchedule and quote the entry and the part at fault.
func ParseSchedule(s string) (*Schedule, error) {
	rules := map[string]Rule{}
	for i, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		method, r, err := parseEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d %s: %v", ErrBadSchedule, i+1, clip(entry), err)
		}
		if _, dup := rules[method]; dup {
			return nil, fmt.Errorf("%w: entry %d %s: method %s listed twice", ErrBadSchedule, i+1, clip(entry), method)
		}
		rules[method] = r
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("%w: no entries in %s", ErrBadSchedule, clip(s))
	}
	return NewSchedule(rules)
}

func parseEntry(entry string) (string, Rule, error) {
	parts := strings.Split(entry, ",")
	method, fee, ok := strings.Cut(parts[0], "=")
	method, fee = strings.TrimSpace(method), strings.TrimSpace(fee)
	if !ok {
		return "", Rule{}, fmt.Errorf("want METHOD=FEE, got %s", clip(parts[0]))
	}
	if !slices.Contains(knownMethods, method) {
		return "", Rule{}, fmt.Errorf("method %s is not one of %s", clip(method), strings.Join(knownMethods, ", "))
	}
	var r Rule
	pct, fixed, hasFixed := strings.Cut(fee, "+")
	pct, fixed = strings.TrimSpace(pct), strings.TrimSpace(fixed)
	num, isPct := strings.CutSuffix(pct, "%")
	if !isPct {
		return "", Rule{}, fmt.Errorf("fee %s: want a percentage such as \"1.5%%\", optionally \"+\" a fixed amount", clip(fee))
	}
	rate, err := percentToRate(strings.TrimSpace(num))
	if err != nil {
		return "", Rule{}, fmt.Errorf("fee %s: percentage %s: %v", clip(fee), clip(pct), err)
	}
	r.Percent = rate
	if hasFixed {
		if r.Fixed, err = parseKES(fixed); err != nil {
			return "", Rule{}, fmt.Errorf("fee %s: fixed part %s: %v", clip(fee), clip(fixed), err)
		}
	}
	seen := map[string]bool{}
	for _, opt := range parts[1:] {
		key, val, ok := strings.Cut(opt, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok || (key != "min" && key != "max") {
			return "", Rule{}, fmt.Errorf("option %s: want min=AMOUNT or max=AMOUNT", clip(strings.TrimSpace(opt)))
		}
		if seen[key] {
			return "", Rule{}, fmt.Errorf("option %s given twice", key)
		}
		seen[key] = true
		a, err := parseKES(val)
		if err != nil {
			return "", Rule{}, fmt.Errorf("option %s: %v", clip(strings.TrimSpace(opt)), err)
		}
		if key == "min" {
			r.Min = a
		} else {
			r.Max = a
		}
	}
	r, err = checkRule(r)
	if err != nil {
		return "", Rule{}, err
	}
	return method, r, nil
}

// parseKES parses a non-negative config amount.
func parseKES(s string) (money.Amount, error) {
	a, err := money.Parse(s)
	if err != nil {
		return money.Amount{}, err
	}
	if a.Sign() < 0 {
		return money.Amount{}, fmt.Errorf("%s is negative", a)
	}
	return a, nil
}

// Rule returns the rule for method, with Percent in canonical form
// ("0.015"), and whether the schedule prices that method.
func (s *Schedule) Rule(method string) (Rule, bool) {
	if s == nil {
		return Rule{}, false
	}
	r, ok := s.rules[method]
	return r, ok
}

// Methods returns the priced methods in sorted order.
func (s *Schedule) Methods() []string {
	if s == nil {
		return nil
	}
	ms := make([]string, 0, len(s.rules))
	for m := range s.rules {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	return ms
}

// String returns the schedule in ParseSchedule syntax, methods sorted, so
// the effective configuration can be logged at start-up and parsed back.
func (s *Schedule) String() string {
	var b strings.Builder
	for i, m := range s.Methods() {
		r := s.rules[m]
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(m + "=" + rateToPercent(r.Percent) + "%")
		if !r.Fixed.IsZero() {
			b.WriteString("+" + r.Fixed.String())
		}
		if !r.Min.IsZero() {
			b.WriteString(",min=" + r.Min.String())
		}
		if !r.Max.IsZero() {
			b.WriteString(",max=" + r.Max.String())
		}
	}
	return b.String()
}

// Fee returns the fee for collecting amount (KES, greater than 0) with
// method: amount × Percent rounded half-up to cents, plus Fixed, clamped to
// [Min, Max] (no upper bound when Max is zero).
func (s *Schedule) Fee(method string, amount money.Amount) (money.Amount, error) {
	r, ok := s.Rule(method)
	if !ok {
		return money.Amount{}, fmt.Errorf("%w %s", ErrUnknownMethod, clip(method))
	}
	if amount.Sign() <= 0 {
		return money.Amount{}, fmt.Errorf("%w: got %s", ErrInvalidAmount, amount)
	}
	fee, err := amount.MulRate(r.Percent)
	if err != nil {
		// NewSchedule checked the rate, so this is a broken invariant.
		return money.Amount{}, fmt.Errorf("%w: %s: %v", ErrBadSchedule, method, err)
	}
	fee = fee.Add(r.Fixed)
	if fee.Cmp(r.Min) < 0 {
		fee = r.Min
	}
	if !r.Max.IsZero() && fee.Cmp(r.Max) > 0 {
		fee = r.Max
	}
	return fee, nil
}

// PayoutFee is the fee of a payout of amount by provider: the schedule's rule
// for its method (PayoutMethod), or DefaultSchedule's when the schedule leaves
// the method out, so a fee table written for collections never makes payouts
// free by accident. A nil schedule prices by DefaultSchedule.
func (s *Schedule) PayoutFee(provider string, amount money.Amount) (money.Amount, error) {
	method := PayoutMethod(provider)
	fee, err := s.Fee(method, amount)
	if errors.Is(err, ErrUnknownMethod) {
		fee, err = DefaultSchedule().Fee(method, amount)
	}
	return fee, err
}

// Quote is a priced collection. Value = NetAmount + Charges, exactly.
type Quote struct {
	// Value is what the customer pays (invoice.value).
	Value money.Amount
	// Charges is the fee (invoice.charges).
	Charges money.Amount
	// NetAmount is what the wallet receives (invoice.net_amount).
	NetAmount money.Amount
}

// Quote prices a collection of amount (KES, greater than 0) with method
// under tariff. An empty tariff means BUSINESS-PAYS, the API's default.
//
//   - BUSINESS-PAYS: Value = amount, Charges = Fee(amount),
//     NetAmount = amount - Charges; ErrFeeExceedsAmount unless NetAmount > 0.
//   - CUSTOMER-PAYS: Charges = Fee(amount) (on the requested amount, not
//     grossed up), Value = amount + Charges, NetAmount = amount.
//
// M-Pesa STK amounts should be passed through RoundUpShillings first.
func (s *Schedule) Quote(method, tariff string, amount money.Amount) (Quote, error) {
	if tariff == "" {
		tariff = BusinessPays
	}
	if tariff != BusinessPays && tariff != CustomerPays {
		return Quote{}, fmt.Errorf("%w %s (want %s or %s)", ErrUnknownTariff, clip(tariff), BusinessPays, CustomerPays)
	}
	fee, err := s.Fee(method, amount)
	if err != nil {
		return Quote{}, err
	}
	if tariff == CustomerPays {
		return Quote{Value: amount.Add(fee), Charges: fee, NetAmount: amount}, nil
	}
	net := amount.Sub(fee)
	if net.Sign() <= 0 {
		return Quote{}, fmt.Errorf("%w: %s fee %s on %s leaves %s under %s", ErrFeeExceedsAmount, method, fee, amount, net, BusinessPays)
	}
	return Quote{Value: amount, Charges: fee, NetAmount: net}, nil
}

// RoundUpShillings rounds a up to the next whole shilling, as M-Pesa STK
// push requires: 10.01 becomes 11.00 and 10.00 stays 10.00. It is a true
// ceiling (-10.50 becomes -10.00), the same result as
// money.ParseRoundUp(a.String()), but without that parser's 15-digit input
// limit, so it cannot fail.
func RoundUpShillings(a money.Amount) money.Amount {
	s := a.String()
	frac := money.MustParse("0." + s[strings.IndexByte(s, '.')+1:])
	switch {
	case frac.IsZero():
		return a
	case a.Sign() > 0:
		return a.Sub(frac).Add(money.FromUnits(100))
	default:
		return a.Add(frac) // toward zero is up for negatives
	}
}

// canonRate checks that s is a plain non-negative decimal usable as a rate
// (digits, optionally '.' and digits; at most 15 integer and 18 fractional
// digits) and returns it without redundant zeros: "00.0150" -> "0.015".
func canonRate(s string) (string, error) {
	intPart, frac, hasDot := strings.Cut(s, ".")
	switch {
	case s == "":
		return "", errors.New("empty")
	case !allDigits(intPart) || intPart == "":
		return "", errors.New("want a plain decimal such as 0.015")
	case hasDot && (frac == "" || !allDigits(frac)):
		return "", errors.New("want a plain decimal such as 0.015")
	case len(intPart) > maxRateInt:
		return "", fmt.Errorf("more than %d integer digits", maxRateInt)
	case len(frac) > maxRateFrac:
		return "", fmt.Errorf("more than %d decimal places", maxRateFrac)
	}
	return joinDecimal(intPart, frac), nil
}

// percentToRate turns a percentage without its '%' ("1.5") into a rate
// ("0.015") by moving the decimal point, so nothing is rounded. It accepts
// 0 to 100.
func percentToRate(p string) (string, error) {
	c, err := canonRate(p)
	if err != nil {
		return "", err
	}
	intPart, frac, _ := strings.Cut(c, ".")
	if len(frac) > maxRateFrac-2 {
		return "", fmt.Errorf("more than %d decimal places", maxRateFrac-2)
	}
	intPart = strings.Repeat("0", max(0, 3-len(intPart))) + intPart
	r := joinDecimal(intPart[:len(intPart)-2], intPart[len(intPart)-2:]+frac)
	if !rateAtMostOne(r) {
		return "", errors.New("above 100%")
	}
	return r, nil
}

// rateToPercent is the inverse of percentToRate for a canonical rate.
func rateToPercent(r string) string {
	intPart, frac, _ := strings.Cut(r, ".")
	frac += strings.Repeat("0", max(0, 2-len(frac)))
	return joinDecimal(intPart+frac[:2], frac[2:])
}

// joinDecimal builds a canonical decimal from digit strings: no leading
// zeros in the integer part (but at least "0"), no trailing zeros in the
// fraction, and no '.' when the fraction is empty.
func joinDecimal(intPart, frac string) string {
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	frac = strings.TrimRight(frac, "0")
	if frac == "" {
		return intPart
	}
	return intPart + "." + frac
}

// rateAtMostOne reports whether a canonical rate is <= 1.
func rateAtMostOne(r string) bool {
	return r == "1" || strings.HasPrefix(r, "0")
}

// rateIsZero reports whether a canonical rate is 0.
func rateIsZero(r string) bool { return r == "0" }

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// clip quotes a value for an error message, escaped so that configuration
// or request input cannot forge log lines, and shortened so that the quoted
// text stays within errInputMax+2 characters however many bytes need
// escaping, so it cannot flood logs either.
func clip(s string) string {
	n := min(len(s), errInputMax)
	q := strconv.Quote(s[:n])
	for len(q) > errInputMax+2 {
		n--
		q = strconv.Quote(s[:n])
	}
	if n == len(s) {
		return q
	}
	return fmt.Sprintf("%s... (%d bytes)", q, len(s))
}
