package money

import (
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/apd/v3"
)

// Sentinel errors. Every error returned by this package wraps exactly one of
// them, so handlers can map errors.Is results to responses without parsing
// messages.
var (
	// ErrInvalid reports input that is not an amount in the accepted syntax
	// (or a rate, for MulRate), including values with too many integer digits.
	ErrInvalid = errors.New("money: invalid amount")
	// ErrTooPrecise reports input with more decimal places than the operation
	// accepts. It is separate from ErrInvalid because the input is a
	// well-formed number: the caller must decide how to round, not us.
	ErrTooPrecise = errors.New("money: too many decimal places")
	// ErrOverflow reports an amount that does not fit the requested
	// fixed-width representation (Cents).
	ErrOverflow = errors.New("money: amount out of range")
)

const (
	// places is the scale of every Amount; the exponent is always -places.
	places = 2
	exp    = -places

	// maxIntDigits caps untrusted input. 15 digits is far above any real
	// payment, keeps parsing work bounded, and leaves room for two decimal
	// places plus arithmetic headroom inside int64 cents.
	maxIntDigits = 15
	// maxDBIntDigits is looser because database values are our own data, and
	// aggregates such as SUM over a ledger can legitimately exceed what a
	// single request may carry. 32 + 2 places = 34 significant digits,
	// decimal128's precision; the cap only exists to bound pathological text.
	maxDBIntDigits = 32
	// roundUpMaxFrac is what M-Pesa style sources send before we round up.
	roundUpMaxFrac = 8
	// rateMaxFrac is enough for FX rates and basis-point fees while still
	// rejecting nonsense such as a thousand-digit fraction.
	rateMaxFrac = 18
	// errInputMax caps how much of the offending input an error repeats.
	errInputMax = 40
)

// Amount is an exact decimal amount of money with exactly two decimal places.
// The zero value is 0.00. See the package documentation for guarantees.
type Amount struct {
	// Makes Amount incomparable so that == (which would compare apd's
	// internal representation, not the value) is a compile error.
	_ [0]func()
	d apd.Decimal
}

// Compile-time checks that Amount plugs into encoding/json and database/sql
// the way callers expect (value for writing, pointer for reading).
var (
	_ json.Marshaler   = Amount{}
	_ json.Unmarshaler = (*Amount)(nil)
	_ driver.Valuer    = Amount{}
	_ sql.Scanner      = (*Amount)(nil)
	_ fmt.Stringer     = Amount{}
)

// exactCtx performs unrounded arithmetic: with Precision 0 apd's Add, Sub and
// Mul keep every digit, which is what money sums need. It must never be used
// for Quantize (Precision 0 makes Quantize return NaN); see roundCents. It is
// read-only after init, and apd Contexts are safe for concurrent use.
var exactCtx = apd.BaseContext

// Zero returns 0.00.
func Zero() Amount {
	var a Amount
	a.d.SetFinite(0, exp)
	return a
}

// FromUnits returns the amount holding the given number of minor units
// (cents): FromUnits(1234) is 12.34. Every int64 is representable.
func FromUnits(cents int64) Amount {
	var a Amount
	a.d.SetFinite(cents, exp)
	return a
}

// MustParse is Parse that panics on error. Use it only for literals in code
// and tests, where a bad value is a programming error.
func MustParse(s string) Amount {
	a, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return a
}

// Parse parses a strict decimal string: optional '-', 1 to 15 digits,
// optionally '.' and 1 or 2 digits. More decimal places fail with
// ErrTooPrecise rather than being rounded, because silently changing an
// amount a client sent us is worse than rejecting it.
func Parse(s string) (Amount, error) {
	d, err := parseDecimal(s, grammar{maxInt: maxIntDigits, maxFrac: places})
	if err != nil {
		return Amount{}, err
	}
	return fromExact(&d), nil
}

// ParseRoundUp parses the Parse syntax with up to 8 decimal places and
// rounds toward +Infinity to a whole unit: "10.01" and "10.00000001" become
// 11.00, "10" stays 10.00. M-Pesa only moves whole shillings, and rounding up
// guarantees a charge never falls short of the quoted price. Being a true
// ceiling, negative inputs move toward zero ("-10.5" becomes -10.00).
func ParseRoundUp(s string) (Amount, error) {
	d, err := parseDecimal(s, grammar{maxInt: maxIntDigits, maxFrac: roundUpMaxFrac})
	if err != nil {
		return Amount{}, err
	}
	// Ceil, not Quantize with RoundCeiling: apd's Quantize zeroes a value
	// whose digits are all discarded (0.01 -> 0) whatever the rounding mode.
	var whole apd.Decimal
	mustExact(exactCtx.Ceil(&whole, &d))
	return fromExact(&whole), nil
}

// String returns the amount with exactly two decimal places, such as "38.00"
// or "-5.10". It never returns "-0.00" or exponent notation.
func (a Amount) String() string {
	d := a.canon()
	return d.Text('f')
}

// Add returns a+b exactly.
func (a Amount) Add(b Amount) Amount {
	var d apd.Decimal
	mustExact(exactCtx.Add(&d, &a.d, &b.d))
	return fromExact(&d)
}

// Sub returns a-b exactly.
func (a Amount) Sub(b Amount) Amount {
	var d apd.Decimal
	mustExact(exactCtx.Sub(&d, &a.d, &b.d))
	return fromExact(&d)
}

// Neg returns -a. Neg of zero is 0.00, not -0.00.
func (a Amount) Neg() Amount {
	var d apd.Decimal
	d.Neg(&a.d)
	return fromExact(&d)
}

// MulRate returns a multiplied by rate (for example "0.015" for a 1.5% fee,
// or an FX rate), rounded to cents half away from zero: 0.49995 becomes 0.50
// and -0.005 becomes -0.01. The product is computed exactly first, so the
// result is rounded exactly once.
//
// rate uses the Parse syntax with up to 18 decimal places; it is a string,
// not a float64, so the rate itself is exact.
func (a Amount) MulRate(rate string) (Amount, error) {
	r, err := parseRate(rate)
	if err != nil {
		return Amount{}, err
	}
	var p apd.Decimal
	mustExact(exactCtx.Mul(&p, &a.d, &r))
	d, _ := roundCents(&p)
	return fromExact(&d), nil
}

// Cmp returns -1, 0 or +1 as a is less than, equal to or greater than b.
func (a Amount) Cmp(b Amount) int {
	return a.d.Cmp(&b.d)
}

// Equal reports whether a and b are the same amount. Use it instead of ==,
// which does not compile for Amount.
func (a Amount) Equal(b Amount) bool {
	return a.Cmp(b) == 0
}

// Sign returns -1, 0 or +1 according to the sign of a.
func (a Amount) Sign() int {
	return a.d.Sign()
}

// IsZero reports whether a is 0.00.
func (a Amount) IsZero() bool {
	return a.d.IsZero()
}

// Cents returns a as an exact integer number of minor units (12.34 -> 1234).
// It fails with ErrOverflow when the value does not fit in an int64, which
// can only happen for amounts built by arithmetic or FromUnits near the
// int64 limits, never for a single parsed value.
func (a Amount) Cents() (int64, error) {
	d := a.canon()
	// The coefficient of a two-place decimal is its cent count; reading it
	// through a fresh exponent-0 decimal reuses apd's range checks, which
	// get math.MinInt64 right.
	var c apd.Decimal
	c.Coeff.Set(&d.Coeff)
	c.Negative = d.Negative
	v, err := c.Int64()
	if err != nil {
		return 0, fmt.Errorf("%w: %s does not fit in int64 cents", ErrOverflow, clip(d.Text('f')))
	}
	return v, nil
}

// Sum returns the exact total of as; Sum() is 0.00.
func Sum(as ...Amount) Amount {
	var total apd.Decimal
	total.SetFinite(0, exp)
	for i := range as {
		// Accumulating into a fresh decimal each step keeps total from ever
		// sharing a coefficient with one of the inputs.
		var next apd.Decimal
		mustExact(exactCtx.Add(&next, &total, &as[i].d))
		total.Set(&next)
	}
	return fromExact(&total)
}

// MarshalJSON encodes the amount as a quoted two-place string. A string, not
// a JSON number, so that JavaScript and other float-based decoders cannot
// round it on the way in. Without this method encoding/json would dump apd's
// internal struct fields.
func (a Amount) MarshalJSON() ([]byte, error) {
	s := a.String()
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	b = append(b, s...)
	b = append(b, '"')
	return b, nil
}

// UnmarshalJSON accepts a JSON string ("38.5") or a JSON number token (38.5)
// holding an amount in Parse syntax. Numbers are parsed from their raw bytes,
// never through float64, and exponents (1e2) are rejected like in Parse.
// null is an error: a missing amount must not quietly become 0.00. (For an
// optional amount use *Amount, which encoding/json sets to nil on null
// without calling this method.) On error *a is left unchanged.
func (a *Amount) UnmarshalJSON(b []byte) error {
	b = trimJSONSpace(b)
	if !json.Valid(b) {
		return errorf(ErrInvalid, string(b), "not a JSON value")
	}
	var (
		v   Amount
		err error
	)
	switch c := b[0]; {
	case c == '"':
		// Decode the string with encoding/json so escapes such as \u0031 are
		// handled exactly as any other JSON string would be.
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return errorf(ErrInvalid, string(b), "bad JSON string")
		}
		v, err = Parse(s)
	case c == '-' || isDigit(c):
		v, err = Parse(string(b))
	case c == 'n':
		return errorf(ErrInvalid, string(b), "null is not an amount")
	default:
		return errorf(ErrInvalid, string(b), "want a JSON string or number")
	}
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// Value implements driver.Valuer. It returns the two-place string because
// lib/pq cannot encode *apd.Decimal, and PostgreSQL NUMERIC parses the string
// exactly; a float64 would already have lost the cents.
func (a Amount) Value() (driver.Value, error) {
	return a.String(), nil
}

// Scan implements sql.Scanner for NUMERIC columns, which lib/pq delivers as
// []byte text. string and int64 (integer columns, read as whole units: 5 is
// 5.00) are also accepted. float64 is refused because it has already lost
// precision; cast the column to numeric or text in SQL instead. NULL is
// refused; scan nullable columns into *Amount or sql.Null[Amount].
//
// Database text may carry a larger scale than two (NUMERIC(12,4), AVG, or
// arithmetic in SQL); extra decimal places are accepted only when they are
// all zero, so the value is still exact and nothing is rounded.
func (a *Amount) Scan(src any) error {
	var (
		v   Amount
		err error
	)
	switch s := src.(type) {
	case []byte:
		v, err = parseDB(string(s))
	case string:
		v, err = parseDB(s)
	case int64:
		var d apd.Decimal
		d.SetFinite(s, 0)
		v = fromExact(&d)
	case nil:
		return fmt.Errorf("%w: NULL; scan nullable columns into *Amount or sql.Null[Amount]", ErrInvalid)
	case float64:
		return fmt.Errorf("%w: refusing float64 from database (precision already lost); select the column as numeric or text", ErrInvalid)
	default:
		return fmt.Errorf("%w: cannot scan %T", ErrInvalid, src)
	}
	if err != nil {
		return err
	}
	*a = v
	return nil
}

func parseDB(s string) (Amount, error) {
	d, err := parseDecimal(s, grammar{maxInt: maxDBIntDigits, maxFrac: places, allowZeroTail: true})
	if err != nil {
		return Amount{}, err
	}
	return fromExact(&d), nil
}

func parseRate(s string) (apd.Decimal, error) {
	d, err := parseDecimal(s, grammar{maxInt: maxIntDigits, maxFrac: rateMaxFrac})
	if err != nil {
		return apd.Decimal{}, fmt.Errorf("rate: %w", err)
	}
	return d, nil
}

// grammar parameterises the one strict number syntax this package accepts,
// so every entry point shares the same rules and differs only in limits.
type grammar struct {
	maxInt  int
	maxFrac int
	// allowZeroTail accepts decimal places beyond maxFrac when they are all
	// zero (exact, so nothing is rounded). Only for database text.
	allowZeroTail bool
}

// parseDecimal validates s by hand before giving it to apd, because apd's own
// parser is far more permissive (exponents, '+', NaN, Infinity, leading '.')
// and those forms must never reach a ledger.
func parseDecimal(s string, g grammar) (apd.Decimal, error) {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	intStart := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	switch n := i - intStart; {
	case len(s) == 0:
		return apd.Decimal{}, errorf(ErrInvalid, s, "empty")
	case n == 0:
		if i < len(s) {
			return apd.Decimal{}, errorf(ErrInvalid, s, fmt.Sprintf("want a digit at offset %d, got %q", i, s[i:i+1]))
		}
		return apd.Decimal{}, errorf(ErrInvalid, s, "no digits")
	case n > g.maxInt:
		return apd.Decimal{}, errorf(ErrInvalid, s, fmt.Sprintf("more than %d integer digits", g.maxInt))
	}
	end := len(s)
	if i < len(s) {
		if s[i] != '.' {
			return apd.Decimal{}, errorf(ErrInvalid, s, fmt.Sprintf("unexpected %q at offset %d", s[i:i+1], i))
		}
		i++
		fracStart := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i < len(s) {
			return apd.Decimal{}, errorf(ErrInvalid, s, fmt.Sprintf("unexpected %q at offset %d", s[i:i+1], i))
		}
		n := i - fracStart
		if n == 0 {
			return apd.Decimal{}, errorf(ErrInvalid, s, "no digits after '.'")
		}
		if n > g.maxFrac {
			keep := fracStart + g.maxFrac
			if !g.allowZeroTail || !allZeros(s[keep:]) {
				return apd.Decimal{}, errorf(ErrTooPrecise, s, fmt.Sprintf("more than %d decimal places", g.maxFrac))
			}
			// Dropping zeros is exact and stops a long zero tail from
			// becoming a huge coefficient.
			end = keep
		}
	}
	var d apd.Decimal
	// The syntax check above admits only plain decimals that apd parses
	// exactly (BaseContext has no precision limit), so an error here is a
	// bug in the check, not bad input.
	if _, _, err := d.SetString(s[:end]); err != nil {
		return apd.Decimal{}, errorf(ErrInvalid, s, "internal parse error: "+err.Error())
	}
	return d, nil
}

// roundCents rounds x to two places, half away from zero, into a fresh
// decimal and reports whether anything was discarded.
//
// The mode is fixed on purpose: when every digit of x lies below the cent,
// apd's Quantize returns zero without consulting the rounding mode. That is
// right for half-up (such values are under a tenth of a cent) but would be
// wrong for ceiling or away-from-zero modes, so this helper must not grow a
// rounding parameter.
//
// The precision is derived from x because Quantize refuses results with more
// digits than the context precision (and with precision 0 returns NaN); +3
// covers the digits added when moving to a smaller exponent or carrying on
// round-up. Amounts are unbounded after arithmetic, so a fixed precision
// would eventually fail.
func roundCents(x *apd.Decimal) (apd.Decimal, bool) {
	prec := uint32(34)
	if n := uint32(x.NumDigits()) + 3 + uint32(max(x.Exponent-exp, 0)); n > prec {
		prec = n
	}
	ctx := apd.Context{
		Precision:   prec,
		MaxExponent: apd.MaxExponent,
		MinExponent: apd.MinExponent,
		Traps:       apd.DefaultTraps,
		Rounding:    apd.RoundHalfUp,
	}
	var d apd.Decimal
	cond, err := ctx.Quantize(&d, x, exp)
	if err != nil || d.Form != apd.Finite {
		panic(fmt.Sprintf("money: rounding %s to cents: %v (%s)", x.Text('f'), err, cond))
	}
	if d.IsZero() {
		// Rounding a small negative (e.g. -0.001), or the ceiling of -0.5,
		// yields -0; a signed zero would print as "-0.00".
		d.Negative = false
	}
	return d, cond.Inexact()
}

// fromExact turns a decimal that already has at most two places into an
// Amount. Used after operations that cannot introduce more places (parsing
// at most two places, add, sub, neg); reaching it with a rounded result
// would mean a bug here, so it panics rather than losing money.
func fromExact(x *apd.Decimal) Amount {
	d, inexact := roundCents(x)
	if inexact {
		panic(fmt.Sprintf("money: internal error: %s is not exact at two places", x.Text('f')))
	}
	var a Amount
	a.d.Set(&d)
	return a
}

// canon returns a's decimal at exponent -2. Only the zero value Amount{}
// (exponent 0) is not already in that form.
func (a Amount) canon() apd.Decimal {
	if a.d.Exponent == exp && !(a.d.Negative && a.d.IsZero()) {
		return a.d
	}
	d, _ := roundCents(&a.d)
	return d
}

// mustExact checks the result of an exactCtx operation. With unlimited
// precision and exponents near -2 apd cannot fail or round, so anything else
// is a broken invariant and continuing would corrupt a balance.
func mustExact(cond apd.Condition, err error) {
	if err != nil || cond.Inexact() || cond.Rounded() {
		panic(fmt.Sprintf("money: exact arithmetic failed: %v (%s)", err, cond))
	}
}

func errorf(sentinel error, input, reason string) error {
	return fmt.Errorf("%w: %s: %s", sentinel, reason, clip(input))
}

// clip quotes at most errInputMax bytes of untrusted input for an error
// message. Quoting escapes control characters so the input cannot forge log
// lines; clipping keeps a megabyte body from ending up in every log entry.
func clip(s string) string {
	if len(s) <= errInputMax {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:errInputMax], len(s))
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func allZeros(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// trimJSONSpace strips the whitespace JSON permits around a value.
// encoding/json never passes it, but direct callers may.
func trimJSONSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// Currencies the service keeps accounts in (every one has two decimal places).
var Currencies = map[string]bool{"KES": true, "USD": true, "EUR": true, "GBP": true}
