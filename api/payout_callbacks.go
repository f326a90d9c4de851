package api

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"paysvc/actors/rails"
	"paysvc/actors/rails/mpesa"
	"paysvc/actors/rails/payout"
	"paysvc/actors/values/money"
	"paysvc/api/edge"
	"paysvc/storage"
	"paysvc/topics"
)

// darajaToken checks the secret path token of a Daraja callback.
func (s *Server) darajaToken(c echo.Context) bool {
	tok := s.cfg.DarajaCallbackToken
	return tok != "" && subtle.ConstantTimeCompare([]byte(c.Param("token")), []byte(tok)) == 1
}

func darajaAccepted(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"ResultCode": 0, "ResultDesc": "Accepted"})
}

// b2cResult receives the outcome of a B2C payout. The body is validated strictly;
// its OriginatorConversationID is our transaction id, which names the file and the
// merchant. The outcome becomes the transaction's FINAL payout.results command,
// whose id derives from the file and the transaction: a repeated callback applies
// once, and a transaction already final ignores any later outcome.
func (s *Server) b2cResult(c echo.Context) error {
	if !s.darajaToken(c) {
		return edge.NotFound("Not found.")
	}
	raw, err := edge.RawBody(c)
	if err != nil {
		return err
	}
	res, err := mpesa.ParseB2CResult(raw)
	if err != nil {
		return edge.Invalid("Body", "Not a valid M-Pesa B2C result.")
	}
	out := topics.PayoutTxnResult{TransactionID: res.OriginatorConversationID, Success: res.Success(), Description: res.Description}
	if res.Success() {
		out.ProviderReference, out.ProviderAccountName = res.Receipt, res.ReceiverName
	}
	logArgs := []any{"conversation_id", clipLog(res.ConversationID), "result_code", res.Code}
	ref, send, ok, err := s.b2cPayout(c, out.TransactionID, logArgs...)
	if !ok {
		return err
	}
	if send.Reference != "" && res.ConversationID != send.Reference {
		// Daraja answered our request with another ConversationID: this result is
		// not about the payment we sent (forged, or another system's), and a false
		// failure would release the hold of a payment that may be paid.
		s.log.Warn("M-Pesa B2C result with a ConversationID that is not the one Daraja gave: not applied",
			append([]any{"transaction_id", clipLog(out.TransactionID)}, logArgs...)...)
		return darajaAccepted(c)
	}
	return s.b2cApply(c, ref, out)
}

// b2cPayout finds the B2C payout a Daraja answer is about, and what the rails role
// did with it; !ok with a nil error means the answer was acknowledged and is not
// ours to apply: the transaction is not one of our B2C payouts, or the rails role
// never sent it (no claim in payout_sends), so no answer of Daraja can be about it.
func (s *Server) b2cPayout(c echo.Context, txnID string, logArgs ...any) (storage.PayoutRef, storage.PayoutSend, bool, error) {
	ctx := c.Request().Context()
	ref, err := storage.PayoutTxnRef(ctx, s.db, txnID)
	if errors.Is(err, storage.ErrNotFound) || err == nil && ref.Provider != payout.ProviderMpesaB2C {
		// Not one of our B2C payouts: nothing to apply, and Daraja must not retry.
		s.log.Warn("M-Pesa B2C outcome for an unknown transaction", append([]any{"originator_conversation_id", clipLog(txnID)}, logArgs...)...)
		return ref, storage.PayoutSend{}, false, darajaAccepted(c)
	}
	if err != nil {
		return ref, storage.PayoutSend{}, false, err
	}
	send, err := storage.GetPayoutSend(ctx, s.db, txnID)
	if errors.Is(err, storage.ErrNotFound) {
		s.log.Warn("M-Pesa B2C outcome for a transaction never sent: not applied",
			append([]any{"transaction_id", clipLog(txnID), "file_id", ref.FileID}, logArgs...)...)
		return ref, send, false, darajaAccepted(c)
	}
	return ref, send, err == nil, err
}

// b2cApply makes out the FINAL outcome of ref: the payout.results command of batch
// "b2c-" + transaction id, whichever answer of Daraja (the B2C result or a
// Transaction Status answer) brings it. Both are the same command id, so only the
// first to arrive applies.
func (s *Server) b2cApply(c echo.Context, ref storage.PayoutRef, out topics.PayoutTxnResult) error {
	ctx := c.Request().Context()
	txnID := out.TransactionID
	r := topics.PayoutResults{FileID: ref.FileID, MerchantID: ref.MerchantID, Stage: topics.PayoutStageFinal,
		Batch: "b2c-" + txnID, Results: []topics.PayoutTxnResult{out}}
	if err := rails.PayoutSink(s.kafka, s.ns, rails.Origin{Environment: s.cfg.Environment})(ctx, r); err != nil {
		s.log.Error("produce M-Pesa B2C result", "transaction_id", txnID, "file_id", ref.FileID, "err", err)
		return edge.Unavailable() // Daraja retries a result that is not acknowledged
	}
	return darajaAccepted(c)
}

// b2cStatus receives Daraja's answer to a Transaction Status query
// (rails.QueryB2CPayouts). A final answer (Completed, or a definite failure) is
// the transaction's FINAL outcome, through the same command as its B2C result
// (b2cApply), so a B2C result and a status answer never both apply. Anything else
// (pending, a failed query, a transaction M-Pesa does not find) proves nothing:
// it is logged, acknowledged, and the transaction stays PROCESSING.
func (s *Server) b2cStatus(c echo.Context) error {
	if !s.darajaToken(c) {
		return edge.NotFound("Not found.")
	}
	raw, err := edge.RawBody(c)
	if err != nil {
		return err
	}
	res, err := mpesa.ParseStatusResult(raw)
	if err != nil {
		return edge.Invalid("Body", "Not a valid M-Pesa transaction status result.")
	}
	logArgs := []any{"conversation_id", clipLog(res.ConversationID), "result_code", res.Code,
		"result_desc", clipLog(res.Description), "transaction_status", clipLog(res.Status)}
	if !res.Final {
		s.log.Warn("M-Pesa transaction status: outcome still unknown, the payout stays PROCESSING",
			append([]any{"transaction_id", clipLog(res.TransactionID)}, logArgs...)...)
		return darajaAccepted(c)
	}
	ref, _, ok, err := s.b2cPayout(c, res.TransactionID, logArgs...)
	if !ok {
		return err
	}
	if res.Paid && res.Amount.Sign() > 0 {
		// M-Pesa says it paid: it must have paid what we asked. Another amount means
		// the answer is not about this payout as we know it; an operator decides.
		if want, perr := money.Parse(ref.Amount); perr != nil || !want.Equal(res.Amount) {
			s.log.Error("M-Pesa transaction status: Completed for another amount; the payout stays PROCESSING for an operator",
				append([]any{"transaction_id", clipLog(res.TransactionID), "amount", ref.Amount, "reported", res.Amount.String()}, logArgs...)...)
			return darajaAccepted(c)
		}
	}
	out := topics.PayoutTxnResult{TransactionID: res.TransactionID, Success: res.Paid}
	if res.Paid {
		out.Description = "Paid (M-Pesa transaction status)."
		out.ProviderReference, out.ProviderAccountName = res.Receipt, res.PartyName
	} else {
		out.Description = "M-Pesa reports the payout " + strings.ToLower(res.Status) + "."
	}
	return s.b2cApply(c, ref, out)
}

// b2cTimeout receives Daraja's queue timeout notice: the request waited too long in
// Daraja's queue. It proves neither payment nor its absence, so the transaction
// stays PROCESSING and is never sent again (payout_sends); the result callback, if
// one follows, finishes it, otherwise an operator does. The notice is only logged.
func (s *Server) b2cTimeout(c echo.Context) error {
	if !s.darajaToken(c) {
		return edge.NotFound("Not found.")
	}
	raw, err := edge.RawBody(c)
	if err != nil {
		return err
	}
	var body struct {
		Result *struct {
			OriginatorConversationID string          `json:"OriginatorConversationID"`
			ConversationID           string          `json:"ConversationID"`
			ResultCode               json.RawMessage `json:"ResultCode"`
			ResultDesc               string          `json:"ResultDesc"`
		} `json:"Result"`
	}
	if len(raw) > 64<<10 || json.Unmarshal(raw, &body) != nil || body.Result == nil {
		return edge.Invalid("Body", "Not a valid M-Pesa B2C timeout notice.")
	}
	s.log.Warn("M-Pesa B2C queue timeout: the payout stays PROCESSING until its result or an operator",
		"transaction_id", clipLog(body.Result.OriginatorConversationID), "conversation_id", clipLog(body.Result.ConversationID),
		"result_code", clipLog(string(body.Result.ResultCode)), "result_desc", clipLog(body.Result.ResultDesc))
	return darajaAccepted(c)
}

// clipLog bounds untrusted text before it reaches a log line.
func clipLog(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
