package invoice

import (
	"errors"

	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/values/money"
)

// Collection bounds, in KES: M-Pesa takes KES 10..150,000 a prompt; card and
// PesaLink are bounded by MaxCollection, a bank transfer's ceiling and far below
// what a wallet balance can hold (docs/api-decisions.md, "Amount bounds").
var (
	MpesaMin      = money.MustParse("10.00")
	MpesaMax      = money.MustParse("150000.00")
	MaxCollection = money.MustParse("999999.00")
)

// TariffFields is the request field each method's calls read its tariff from, so
// a refusal names the field the customer filled in.
var TariffFields = map[string]string{
	tariff.MethodMpesa: "mobile_tarrif", tariff.MethodCard: "card_tarrif", tariff.MethodPesalink: "bank_tarrif",
}

// Priced is a collection as Price prices it: the invoice's three amounts and the
// KES amount the schedule priced (M-Pesa: rounded up to whole shillings). Quote
// also sets Rate, the KES per unit of the customer's currency it converted at.
type Priced struct {
	tariff.Quote
	Amount money.Amount
	Rate   string
}

// PriceError is a collection the rules do not price: the request field at fault
// (Attr) and what the customer is told (Detail), which the invoice kind refuses
// with and a quote answers with alike.
type PriceError struct{ Attr, Detail string }

func (e *PriceError) Error() string { return e.Detail }

// Quote prices a collection of amount in currency (empty: KES) by method under
// tar: it converts the amount into KES at rates (Convert), then prices the KES
// amount (Price). The invoice kind opens each invoice with it, a fee quote answers
// with it and the API refuses with it before it sends a payment, so the three
// cannot disagree on a rate, a rounding or a refusal. A nil fees or rates is
// tariff.DefaultSchedule or tariff.DefaultRates.
func Quote(fees *tariff.Schedule, rates *tariff.Rates, method, tar, currency string, amount money.Amount) (Priced, error) {
	if currency == "" {
		// An opening command without a currency carries a KES amount: the log
		// holds such commands, and they apply as KES.
		currency = tariff.Settlement
	}
	kes, rate, err := Convert(rates, currency, amount)
	if err != nil {
		return Priced{}, err
	}
	p, err := Price(fees, method, tar, kes)
	p.Rate = rate
	return p, err
}

// Convert is amount in currency in KES at rates, rounded half-up to cents, and
// the rate used: how Quote converts, and how a fixed checkout amount is held to
// MaxCollection. A currency the rates hold no rate for is refused on the
// currency field. A nil rates is tariff.DefaultRates.
func Convert(rates *tariff.Rates, currency string, amount money.Amount) (money.Amount, string, error) {
	if rates == nil {
		rates = tariff.DefaultRates()
	}
	kes, rate, err := rates.ToKES(currency, amount)
	if errors.Is(err, tariff.ErrUnknownCurrency) {
		return kes, rate, &PriceError{"currency", "No exchange rate is configured for " + currency + "."}
	}
	return kes, rate, err
}

// Price prices a collection of kes (already in KES) by method under tar, as the
// invoice kind opens it. It is pure, so the quote a customer is shown before any
// command exists and the invoice the kind then opens are one computation and
// cannot disagree. M-Pesa prompts whole shillings: the amount is rounded up
// before it is bounded and priced, and under CUSTOMER-PAYS the prompt (amount
// plus fee) is rounded up again, the rounding going to the charges. Card and
// PesaLink price the amount as it is. A nil fees is tariff.DefaultSchedule.
func Price(fees *tariff.Schedule, method, tar string, kes money.Amount) (Priced, error) {
	if fees == nil {
		fees = tariff.DefaultSchedule()
	}
	if method == tariff.MethodMpesa {
		kes = tariff.RoundUpShillings(kes)
		if kes.Cmp(MpesaMin) < 0 || kes.Cmp(MpesaMax) > 0 {
			return Priced{Amount: kes}, &PriceError{"amount", "M-Pesa amount must be between KES 10 and KES 150,000 (after conversion to KES)."}
		}
	} else if kes.Cmp(MaxCollection) > 0 {
		return Priced{Amount: kes}, &PriceError{"amount", "Amount must be at most KES 999,999 (after conversion to KES): no payment method collects more."}
	}
	q, err := fees.Quote(method, tar, kes)
	if err != nil {
		return Priced{Amount: kes}, priceRefusal(method, err)
	}
	if method == tariff.MethodMpesa && TariffOrDefault(tar) == tariff.CustomerPays {
		q.Value = tariff.RoundUpShillings(q.Value)
		q.Charges = q.Value.Sub(q.NetAmount)
	}
	return Priced{Quote: q, Amount: kes}, nil
}

// priceRefusal is a schedule's refusal in the customer's words; an error that is
// no refusal of the request (a broken schedule) is returned as it is.
func priceRefusal(method string, err error) error {
	fee := method
	if method == tariff.MethodMpesa {
		fee = "transaction"
	}
	switch field := TariffFields[method]; {
	case errors.Is(err, tariff.ErrUnknownTariff):
		return &PriceError{field, field + " must be BUSINESS-PAYS or CUSTOMER-PAYS."}
	case errors.Is(err, tariff.ErrFeeExceedsAmount):
		return &PriceError{"amount", "The amount does not cover the " + fee + " fee."}
	case errors.Is(err, tariff.ErrUnknownMethod):
		return &PriceError{"method", "This server does not collect by " + method + "."}
	case errors.Is(err, tariff.ErrInvalidAmount):
		return &PriceError{"amount", "Amount must be greater than 0."}
	}
	return err
}

// TariffOrDefault is the tariff an invoice records: BUSINESS-PAYS when the
// request names none.
func TariffOrDefault(t string) string {
	if t == "" {
		return tariff.BusinessPays
	}
	return t
}

// MethodOf is the tariff method an opening command's provider is priced by:
// card and PesaLink by their own, everything else (the STK push, a checkout's
// M-Pesa payment) as M-Pesa.
func MethodOf(provider string) string {
	if provider == "CARD" || provider == "PESALINK" {
		return provider
	}
	return "M-PESA"
}
