package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/values/money"
	"paysvc/api/edge"
)

// estimateMethods maps what clients send as `method` to the fee schedule's name.
// The Python SDK passes the caller's word through, so the spellings the other
// calls accept are accepted here too (MPESA_STK_PUSH is the PHP SDK's).
var estimateMethods = map[string]string{
	"M-PESA": tariff.MethodMpesa, "MPESA": tariff.MethodMpesa, "MPESA_STK_PUSH": tariff.MethodMpesa,
	"CARD-PAYMENT": tariff.MethodCard, "CARD": tariff.MethodCard,
	"PESALINK": tariff.MethodPesalink,
}

// tariffFields is the field each method's own calls read the tariff from; a quote
// takes it when `tarrif` (the Python SDK's name) is absent.
var tariffFields = map[string]string{
	tariff.MethodMpesa: "mobile_tarrif", tariff.MethodCard: "card_tarrif", tariff.MethodPesalink: "bank_tarrif",
}

// priceCollection prices a collection of kes (already converted to KES) as the
// collection calls do: M-Pesa rounds up to whole shillings and is bounded to
// KES 10..150,000; card and PesaLink are bounded by maxCollectionKES. The quote
// endpoint answers from here, so a quote is what the payment will charge.
func (s *Server) priceCollection(method, tar string, kes money.Amount) (tariff.Quote, money.Amount, error) {
	field := tariffFields[method]
	if method == tariff.MethodMpesa {
		kes = tariff.RoundUpShillings(kes)
		if kes.Cmp(mpesaMin) < 0 || kes.Cmp(mpesaMax) > 0 {
			return tariff.Quote{}, kes, edge.Invalid("amount", "M-Pesa amount must be between KES 10 and KES 150,000 (after conversion to KES).")
		}
		q, err := s.stkQuote(tar, kes)
		return q, kes, err
	}
	if kes.Cmp(maxCollectionKES) > 0 {
		return tariff.Quote{}, kes, edge.Invalid("amount", "Amount must be at most KES 999,999 (after conversion to KES): no payment method collects more.")
	}
	q, err := s.cfg.Fees.Quote(method, tar, kes)
	switch {
	case errors.Is(err, tariff.ErrUnknownTariff):
		return q, kes, edge.Invalid(field, field+" must be BUSINESS-PAYS or CUSTOMER-PAYS.")
	case errors.Is(err, tariff.ErrFeeExceedsAmount):
		return q, kes, edge.Invalid("amount", "The amount does not cover the "+method+" fee.")
	case errors.Is(err, tariff.ErrUnknownMethod):
		return q, kes, edge.Invalid("method", "This server does not collect by "+method+".")
	}
	return q, kes, err
}

type estimateJSON struct {
	Method   string       `json:"method"`
	Tarrif   string       `json:"tarrif"`
	Currency string       `json:"currency"`
	Amount   money.Amount `json:"amount"`
	// What the payment settles in, the rate used and the converted amount the fee
	// schedule priced (M-Pesa: rounded up to whole shillings).
	SettlementCurrency string       `json:"settlement_currency"`
	ExchangeRate       string       `json:"exchange_rate"`
	SettlementAmount   money.Amount `json:"settlement_amount"`
	// The invoice the payment would open: value = net_amount + charges.
	Value     money.Amount `json:"value"`
	Charges   money.Amount `json:"charges"`
	NetAmount money.Amount `json:"net_amount"`
}

// amountEstimate answers POST /payment/get_amount_estimate/: what a collection of
// amount in currency by method would charge the customer, cost in fees and credit
// the wallet, from the same fee schedule and exchange rates the collection calls
// use. It reads nothing of the merchant's and changes nothing, so the public key
// is enough (the Python SDK sends it).
func (s *Server) amountEstimate(c echo.Context) error {
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	word, err := b.Str("method", true, 20, nil)
	if err != nil {
		return err
	}
	method, ok := estimateMethods[word]
	if !ok {
		return edge.Invalid("method", "method must be M-PESA, CARD-PAYMENT or PESALINK.")
	}
	currency, err := b.Str("currency", false, 3, nil)
	if err != nil {
		return err
	}
	if currency == "" {
		currency = "KES"
	}
	if !wallet.Currencies[currency] {
		return edge.Invalid("currency", "Currency must be one of KES, USD, EUR, GBP.")
	}
	amount, _, err := b.Amount("amount", true)
	if err != nil {
		return err
	}
	if amount.Sign() <= 0 {
		return edge.Invalid("amount", "Amount must be greater than 0.")
	}
	if method != tariff.MethodMpesa && s.cfg.Environment != "sandbox" {
		// As the payment calls themselves: no live card acquirer or PesaLink link yet.
		return edge.Invalid("method", word+" payments are not available on this server yet.")
	}
	tarField := "tarrif"
	if !b.Has(tarField) {
		tarField = tariffFields[method]
	}
	tar, err := b.Str(tarField, false, 20, nil)
	if err != nil {
		return err
	}
	if tar != "" && tar != tariff.BusinessPays && tar != tariff.CustomerPays {
		return edge.Invalid(tarField, tarField+" must be BUSINESS-PAYS or CUSTOMER-PAYS.")
	}
	kes, rate, err := s.cfg.Rates.ToKES(currency, amount)
	if errors.Is(err, tariff.ErrUnknownCurrency) {
		return edge.Invalid("currency", "No exchange rate is configured for "+currency+".")
	}
	if err != nil {
		return err
	}
	q, priced, err := s.priceCollection(method, tar, kes)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, estimateJSON{Method: word, Tarrif: tarOrDefault(tar), Currency: currency, Amount: amount,
		SettlementCurrency: tariff.Settlement, ExchangeRate: rate, SettlementAmount: priced,
		Value: q.Value, Charges: q.Charges, NetAmount: q.NetAmount})
}
