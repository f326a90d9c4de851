// Package money provides Amount, the exact decimal money type used across the
// payments service.
//
// # Why it exists
//
// Binary floating point cannot represent most decimal fractions (0.10 is
// 0.1000000000000000055511151231257827...), so sums drift, comparisons lie
// and rounding happens at places nobody chose. In a ledger that turns into
// cents that appear or vanish. Amount keeps every value as an exact decimal
// (github.com/cockroachdb/apd/v3) and float64 never appears on any path in or
// out: not when parsing, not in JSON, not in SQL.
//
// apd itself is easy to misuse in ways that silently corrupt money: a
// by-value apd.Decimal marshals to meaningless JSON, a zero-precision Context
// makes Quantize return NaN, rounding can yield negative zero, and its
// parsers accept exponents, NaN and Infinity. Amount wraps it so callers
// cannot reach those traps.
//
// # Guarantees
//
//   - An Amount is always finite and carries exactly two decimal places;
//     String always prints "-?\d+\.\d{2}" and never "-0.00".
//   - The zero value Amount{} is a valid 0.00.
//   - Add, Sub, Neg and Sum are exact: they never round and never overflow
//     (the coefficient is arbitrary precision). Overflow is only reported
//     where a fixed-width integer is requested, by Cents.
//   - Nothing rounds silently. Parse, JSON and SQL reject more than two
//     decimal places with ErrTooPrecise instead of guessing. The only
//     operations that round say so in their names and use a fixed, documented
//     mode: ParseRoundUp (ceiling to whole units, for M-Pesa) and MulRate
//     (half away from zero to cents, for fees and FX).
//   - Input syntax is strict: optional '-', 1 to 15 integer digits, optional
//     '.' followed by 1 or 2 digits. No '+', exponent, whitespace, leading
//     '.', NaN or Infinity, so a value has a single obvious meaning wherever
//     it came from. The 15-digit cap bounds the work an untrusted request can
//     cause and keeps every parsed value convertible to int64 cents. Scan is
//     looser only where database text needs it: up to 32 integer digits (for
//     aggregates) and extra decimal places when they are all zeros.
//   - Errors wrap ErrInvalid or ErrTooPrecise (test with errors.Is) and quote
//     at most 40 bytes of the offending input, escaped, so hostile input cannot
//     flood or forge log lines.
//   - JSON is always a quoted string ("38.00") so JavaScript clients and
//     generic decoders do not turn it into a float. Decoding also accepts a
//     bare JSON number (38.5) from the raw token bytes, without exponent.
//   - SQL values are written as two-place strings, which PostgreSQL NUMERIC
//     accepts and lib/pq can send (it cannot encode *apd.Decimal).
//
// An Amount is a plain value: safe to copy, to store in maps and slices, and
// to share between goroutines. Every operation writes its result into a fresh
// decimal and never mutates an operand.
//
// Amount deliberately cannot be compared with ==: two equal amounts may
// differ in internal representation (Amount{} versus Zero(), or large
// coefficients held behind a pointer), so == would give wrong answers. Use
// Cmp or Equal. For the same reason Amount cannot be a map key; key by
// String() if needed.
//
// Amount carries no currency. Callers must keep the currency alongside it and
// never combine amounts of different currencies.
package money
