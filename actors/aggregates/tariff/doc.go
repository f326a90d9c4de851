// Package tariff prices collections and payouts: the fee schedule that says
// what each payment method (M-PESA, PESALINK, CARD, and PAYOUT-<provider> for
// each payout provider) costs, the tariff that says who pays a collection's
// fee, and the FX rate table that turns USD, EUR, GBP, UGX and TZS into KES,
// the settlement currency (UGX and TZS: checkout sessions only).
//
// # Why it exists
//
// Every invoice carries three amounts that must agree to the cent: value
// (what the customer is charged), charges (our fee) and net_amount (what
// the wallet is credited). If each handler computed them itself, the fee
// rules, the rounding and the treatment of mobile_tarrif, bank_tarrif and
// card_tarrif would drift apart between endpoints, and an amount charged
// would not match the amount credited plus the fee. This package is the one
// place that does it, with exact decimal arithmetic (paysvc/actors/values/money,
// never float64), and the fee table is configuration rather than code so
// it can change without a release. docs/fees.md is the user-facing
// description of the defaults and the rules; keep the two in step.
//
// # Pricing
//
// A Rule prices one method: fee = amount × Percent, rounded half-up to
// cents, plus Fixed, then clamped to [Min, Max] (a zero Max means no cap).
// Fixed, Min and Max are KES amounts, so a schedule prices KES amounts:
// convert foreign-currency collections with Rates.ToKES first (the invoice
// aggregate's Quote does, then prices).
//
// Quote applies a tariff:
//
//   - BUSINESS-PAYS (the default, also for an empty tariff): the customer
//     pays the requested amount and the fee comes out of it:
//     Value = amount, NetAmount = amount - fee. A fee that would leave
//     nothing for the wallet fails with ErrFeeExceedsAmount.
//   - CUSTOMER-PAYS: the fee is added on top: Value = amount + fee,
//     NetAmount = amount. The fee is computed on the requested amount, not
//     grossed up on the total, so the customer sees a fee that is exactly
//     the advertised percentage of what they asked to pay.
//
// Every successful Quote satisfies Value = NetAmount + Charges exactly, with
// all three non-negative and NetAmount positive.
//
// M-Pesa moves whole shillings only: STK push amounts go through
// RoundUpShillings before they are priced.
//
// # Configuration
//
// ParseSchedule and ParseRates read the strings the service takes from
// PAYSVC_FEES and PAYSVC_FX_RATES; the syntax is described on those
// functions and in docs/fees.md. A parsed string replaces the defaults
// entirely rather than patching them: a method it leaves out is not priced by
// that Schedule. A payout whose method PAYSVC_FEES leaves out is priced with
// DefaultSchedule (Schedule.PayoutFee, which the payout aggregate prices each
// transaction with when it opens a file), so a collections-only fee table
// never makes payouts free by accident; a collection method left out is
// refused.
//
// Schedule and Rates are immutable once built and safe for concurrent use.
//
// # Errors
//
// Every error wraps one of the sentinels (ErrUnknownMethod,
// ErrUnknownTariff, ErrInvalidAmount, ErrFeeExceedsAmount, ErrBadSchedule,
// ErrUnknownCurrency, ErrBadRates) so callers can branch with errors.Is,
// and names the offending value, quoted and clipped.
package tariff
