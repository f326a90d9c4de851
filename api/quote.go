package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/invoice"
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
		tarField = invoice.TariffFields[method]
	}
	tar, err := readTariff(b, tarField)
	if err != nil {
		return err
	}
	// A quote is a read before any command exists: it converts and prices with the
	// very function the invoice kind opens the invoice with, so the two cannot
	// disagree.
	q, err := invoice.Quote(s.cfg.Fees, s.cfg.Rates, method, tar, currency, amount)
	if err != nil {
		return priceRefusal(err)
	}
	return c.JSON(http.StatusOK, estimateJSON{Method: word, Tarrif: invoice.TariffOrDefault(tar), Currency: currency, Amount: amount,
		SettlementCurrency: tariff.Settlement, ExchangeRate: q.Rate, SettlementAmount: q.Amount,
		Value: q.Value, Charges: q.Charges, NetAmount: q.NetAmount})
}
