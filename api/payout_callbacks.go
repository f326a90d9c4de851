package api

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"paysvc/actors/rails"
	"paysvc/actors/rails/mpesa"
	"paysvc/actors/rails/payout"
	"paysvc/storage"
	"paysvc/topics"
)

// routeB2CResults registers the two URLs Daraja calls back for B2C payouts. Like
// the STK callback they carry the secret token and no other authentication.
func (s *Server) routeB2CResults(e *echo.Echo) {
	e.POST("/api/v1/send-money/mpesa/result/:token", s.b2cResult)
	e.POST("/api/v1/send-money/mpesa/timeout/:token", s.b2cTimeout)
}

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
		return notFound("Not found.")
	}
	raw, err := rawBody(c)
	if err != nil {
		return err
	}
	res, err := mpesa.ParseB2CResult(raw)
	if err != nil {
		return invalid("Body", "Not a valid M-Pesa B2C result.")
	}
	ctx := c.Request().Context()
	txnID := res.OriginatorConversationID
	ref, err := storage.PayoutTxnRef(ctx, s.db, txnID)
	if errors.Is(err, storage.ErrNotFound) || err == nil && ref.Provider != payout.ProviderMpesaB2C {
		// Not one of our B2C payouts: nothing to apply, and Daraja must not retry.
		s.log.Warn("M-Pesa B2C result for an unknown transaction", "originator_conversation_id", txnID,
			"conversation_id", res.ConversationID, "result_code", res.Code)
		return darajaAccepted(c)
	}
	if err != nil {
		return err
	}
	out := topics.PayoutTxnResult{TransactionID: txnID, Success: res.Success(), Description: res.Description}
	if res.Success() {
		out.ProviderReference, out.ProviderAccountName = res.Receipt, res.ReceiverName
	}
	r := topics.PayoutResults{FileID: ref.FileID, MerchantID: ref.MerchantID, Stage: topics.PayoutStageFinal,
		Batch: "b2c-" + txnID, Results: []topics.PayoutTxnResult{out}}
	if err := rails.PayoutSink(s.kafka)(ctx, r); err != nil {
		s.log.Error("produce M-Pesa B2C result", "transaction_id", txnID, "file_id", ref.FileID, "err", err)
		return unavailable() // Daraja retries a result that is not acknowledged
	}
	return darajaAccepted(c)
}

// b2cTimeout receives Daraja's queue timeout notice: the request waited too long in
// Daraja's queue. It proves neither payment nor its absence, so the transaction
// stays PROCESSING and is never sent again (payout_sends); the result callback, if
// one follows, finishes it, otherwise an operator does. The notice is only logged.
func (s *Server) b2cTimeout(c echo.Context) error {
	if !s.darajaToken(c) {
		return notFound("Not found.")
	}
	raw, err := rawBody(c)
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
		return invalid("Body", "Not a valid M-Pesa B2C timeout notice.")
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
